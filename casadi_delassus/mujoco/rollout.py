"""``cd.mujoco_rollout``: ``mujoco.rollout.rollout``'s call on C generated for the model (docs/mujoco.md).

Arguments are checked as MuJoCo 4's rollout.py checks them (its own helpers, their ValueError made an
InputError), then: the models (one, or a sequence of the same content) compiled once per content
(codegen/mujoco_rollout.py; refusals by name; once per ``lanes`` too), finite inputs only, ``control_spec`` a
subset of mjSTATE_CTRL | mjSTATE_QFRC_APPLIED, ``len(data)`` threads.  Outputs are computed into fresh arrays and
copied into ``state``/``sensordata`` only when the whole call succeeded."""
from __future__ import annotations

import hashlib
import zlib
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..codegen.contact_rollout import lane_flags
from ..codegen.mujoco_rollout import build
from ..errors import InputError
from ..model.mjcf import mujoco_module
from ..mujoco_model.model import MujocoModel
from ..mujoco_model.rollout_parts import rollout_parts
from ..names import shown
from ..runtime.compiler import find_compiler
from ..runtime.mujoco_rollout import DIVERGED, MAX_ITERATIONS, CompiledRollout

DEFAULT_OUT = Path("codegen_out")
_LOADED: dict[tuple, CompiledRollout] = {}   # (fingerprint, out_dir, cc, lanes) -> CompiledRollout (this process)
# arrays the compiled rollout never reads (names, textures, visuals, a mesh's faces and normals): left out of the
# per-call fingerprint, which then costs about a millisecond where the MJB bytes of a meshed robot cost 60 ms; of
# the mesh arrays it reads the hulls' (mujoco_model/collision.py: vertices, hull graph, polygons), by their CRC-32
# (any changed value changes it): G1's are 6.4 MB, a call took 7.6 ms with them in sha256, 2.9 ms by CRC (0.9 without);
# and those only where a mesh geom can collide (a contype or conaffinity, or an explicit pair): a robot whose meshes
# are visual only (Go2: 3.8 MB of them, 1 of its 2 ms a call) has no hull read
UNREAD = ("mesh_", "tex_", "hfield_", "skin_", "flex", "bvh_", "oct_", "names", "paths", "text_", "tuple_", "key_",
          "plugin", "mat_", "light_", "cam_", "vis")
READ = ("mesh_vert", "mesh_graph", "mesh_poly")
_NAMES: dict[tuple, tuple] = {}    # (type, own) -> the attribute names the fingerprint reads (dir() once per type)


def _names(obj, own):
    """The attribute names of ``obj`` the fingerprint reads (``own``: an MjModel's, less UNREAD but READ), once per type."""
    key = (type(obj), own)
    if key not in _NAMES:
        _NAMES[key] = tuple(n for n in dir(obj) if not n.startswith("_") and (
            not own or not n.startswith(UNREAD) or n.startswith(READ)))
    return _NAMES[key]


def _meshes_collide(m):
    """Whether a mesh geom of MjModel ``m`` can collide: a contype or conaffinity, or in an explicit pair (its sizes,
    types and those arrays are in the fingerprint, so the answer is the fingerprint's)."""
    mesh = np.asarray(m.geom_type) == int(mujoco_module().mjtGeom.mjGEOM_MESH)
    paired = np.isin(np.arange(m.ngeom), np.r_[np.asarray(m.pair_geom1), np.asarray(m.pair_geom2)])
    return bool(np.any(mesh & ((np.asarray(m.geom_contype) != 0) | (np.asarray(m.geom_conaffinity) != 0) | paired)))


def fingerprint(m):
    """A hash of what MjModel ``m`` holds that the compiled rollout can read: its sizes, numeric arrays and options
    (a model changed after its first call gets another fingerprint, hence its own build)."""
    h = hashlib.sha256()
    hulls = _meshes_collide(m)
    for obj, names in ((m, _names(m, True)), (m.opt, _names(m.opt, False))):
        for n in names:
            read = n.startswith(READ)
            if read and not hulls:
                continue
            x = getattr(obj, n, None)
            if isinstance(x, (int, float, np.ndarray)) and not isinstance(x, bool):
                h.update(n.encode())
                buffer = np.ascontiguousarray(x)
                h.update(zlib.crc32(buffer).to_bytes(4, "little") if read else buffer)
    return h.hexdigest()


def _compiled(m, out_dir, cc, lanes=1):
    """(fingerprint, CompiledRollout) of MjModel ``m`` with ``lanes``: built, or taken from the disk cache by its MJB
    bytes, once per fingerprint and lanes in this process."""
    key = (fingerprint(m), str(out_dir), cc, lanes)
    if key not in _LOADED:
        cc_line = find_compiler(cc)
        _LOADED[key] = CompiledRollout(build(MujocoModel(m), rollout_parts, out_dir, ("auto",), cc_line, lanes))
    return key[0], _LOADED[key]


def _mujoco_checks(rollout_module, **arrays):
    """MuJoCo's own argument checks (rollout.py's helpers), their ValueError as one InputError line."""
    try:
        rollout_module._check_must_be_numeric(**arrays)
        rollout_module._check_number_of_dimensions(2, **{k: arrays[k] for k in ("initial_state", "initial_warmstart")})
        rollout_module._check_number_of_dimensions(3, **{k: arrays[k] for k in ("control", "state", "sensordata")})
    except ValueError as exc:
        raise InputError(f"mujoco_rollout: {exc}") from None


def _finite(name, x):
    """A one-line InputError when ``x`` holds NaN or an infinity."""
    if x is not None and not np.all(np.isfinite(x)):
        raise InputError(f"mujoco_rollout: {name} holds a non-finite value (MuJoCo would reset that data with a warning)")


def _control_spec(mujoco, control_spec):
    """(with ctrl, with qfrc_applied) of a control_spec within mjSTATE_CTRL | mjSTATE_QFRC_APPLIED."""
    st = mujoco.mjtState
    spec = int(control_spec)
    if spec & ~int(st.mjSTATE_USER):
        raise InputError("mujoco_rollout: control_spec can only contain bits in mjSTATE_USER")
    if spec & ~(int(st.mjSTATE_CTRL) | int(st.mjSTATE_QFRC_APPLIED)):
        raise InputError(f"mujoco_rollout: control_spec {spec}: only mjSTATE_CTRL and mjSTATE_QFRC_APPLIED are in the "
                         "compiled rollout (not xfrc_applied, eq_active, mocap or userdata)")
    return bool(spec & int(st.mjSTATE_CTRL)), bool(spec & int(st.mjSTATE_QFRC_APPLIED))


def _models(mujoco, model):
    """The one MjModel of ``model`` (an MjModel or a sequence of MjModels of one content)."""
    models = [model] if isinstance(model, mujoco.MjModel) else list(model) if not isinstance(model, (str, bytes)) else []
    if not models or not all(isinstance(m, mujoco.MjModel) for m in models):
        raise InputError(f"mujoco_rollout: model: expected an MjModel or a sequence of them, got {type(model).__name__}")
    return models


def _nthread(mujoco, data):
    """len(data): one MjData or a sequence of them."""
    data = [data] if isinstance(data, mujoco.MjData) else list(data) if isinstance(data, (list, tuple)) else None
    if not data or not all(isinstance(d, mujoco.MjData) for d in data):
        raise InputError("mujoco_rollout: data: expected an MjData or a sequence of them (one per thread)")
    return len(data)


def _warn(status):
    """MuJoCo's warning behaviour: a RuntimeWarning naming the trajectories that diverged (their remaining rows repeat
    the last state) or whose solve stopped at its iteration limit."""
    for code, what in ((DIVERGED, "diverged (a NaN or a value beyond 1e10: the remaining states repeat the last one)"),
                       (MAX_ITERATIONS, "had a constraint solve stop at its iteration limit")):
        bad = np.flatnonzero(status == code)
        if len(bad):
            warnings.warn(f"mujoco_rollout: trajectories {bad[:8].tolist()}{' ...' if len(bad) > 8 else ''} {what}",
                          RuntimeWarning, stacklevel=4)      # mujoco_rollout's caller


def mujoco_rollout(model: Any, data: Any, initial_state: npt.ArrayLike, control: npt.ArrayLike | None = None, *,
                   control_spec: int | None = None, skip_checks: bool = False, nstep: int | None = None,
                   initial_warmstart: npt.ArrayLike | None = None, state: np.ndarray | None = None,
                   sensordata: np.ndarray | None = None, chunk_size: int | None = None, persistent_pool: bool = False,
                   out_dir: str | Path = DEFAULT_OUT, cc: str | None = None,
                   lanes: int | str = 1) -> tuple[np.ndarray, np.ndarray]:
    """``mujoco.rollout.rollout(model, data, initial_state, control, ...)`` → (state nbatch x nstep x nstate,
    sensordata nbatch x nstep x nsensordata) on the compiled C of ``model`` (docs/mujoco.md).  ``skip_checks``,
    ``chunk_size`` and ``persistent_pool`` are accepted and change nothing (every call is checked; the threads
    are the package's one pool, runtime/pool.h, kept between calls); ``out_dir``/``cc``: where and with what the C is
    compiled; ``lanes`` (1, "auto" or a power of two up to 16): the environments of a thread stepped in SIMD lane groups
    of that many (codegen/mujoco_rollout.py), the same states to rounding."""
    return rollout_status(model, data, initial_state, control, control_spec=control_spec, nstep=nstep,
                          initial_warmstart=initial_warmstart, state=state, sensordata=sensordata, out_dir=out_dir,
                          cc=cc, report=_warn, lanes=lanes)[:2]


def rollout_status(model, data, initial_state, control=None, *, control_spec=None, nstep=None, initial_warmstart=None,
                   state=None, sensordata=None, out_dir=DEFAULT_OUT, cc=None, report=None, lanes=1):
    """``mujoco_rollout``'s call → (state, sensordata, status per trajectory: runtime/mujoco_rollout.py's codes),
    ``report(status)`` called (None: nothing) before ``state``/``sensordata`` are written."""
    mujoco = mujoco_module()
    import mujoco.rollout as mr
    try:
        lane_flags(lanes)
    except InputError as exc:
        raise InputError(f"mujoco_rollout: {exc}") from None
    control_spec = int(mujoco.mjtState.mjSTATE_CTRL) if control_spec is None else control_spec
    with_ctrl, with_qfrc = _control_spec(mujoco, control_spec)
    models, nthread = _models(mujoco, model), _nthread(mujoco, data)
    if nstep is not None and (not isinstance(nstep, (int, np.integer)) or isinstance(nstep, bool) or nstep < 0):
        raise InputError(f"mujoco_rollout: nstep must be a non-negative integer, got {shown(nstep)}")
    arrays = dict(initial_state=initial_state, initial_warmstart=initial_warmstart, control=control, state=state,
                  sensordata=sensordata)
    _mujoco_checks(mr, **arrays)
    initial_state, initial_warmstart = mr._ensure_2d(initial_state), mr._ensure_2d(initial_warmstart)
    control, out_state, out_sensor = mr._ensure_3d(control), mr._ensure_3d(state), mr._ensure_3d(sensordata)
    try:
        nbatch = mr._infer_dimension(0, 1, initial_state=initial_state, initial_warmstart=initial_warmstart,
                                     control=control, state=out_state, sensordata=out_sensor)
        if len(models) > 1 and nbatch == 1:
            nbatch = len(models)
        if len(models) > 1 and len(models) != nbatch:
            raise ValueError(f"nbatch inferred as {nbatch} but model is length {len(models)}")
        nstep = mr._infer_dimension(1, 1 if nstep is None else nstep, control=control, state=out_state,
                                    sensordata=out_sensor)
        m = models[0]
        nstate = mujoco.mj_stateSize(m, int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
        ncontrol = mujoco.mj_stateSize(m, int(control_spec))
        mr._check_trailing_dimension(nstate, initial_state=initial_state, state=out_state)
        mr._check_trailing_dimension(ncontrol, control=control)
        mr._check_trailing_dimension(m.nv, initial_warmstart=initial_warmstart)
        mr._check_trailing_dimension(m.nsensordata, sensordata=out_sensor)
    except ValueError as exc:
        raise InputError(f"mujoco_rollout: {exc}") from None
    for name, x in (("initial_state", initial_state), ("initial_warmstart", initial_warmstart), ("control", control)):
        _finite(name, x)
    key, compiled = _compiled(m, out_dir, cc, lanes)
    if any(fingerprint(x) != key for x in models[1:]):
        raise InputError("mujoco_rollout: a sequence of models of different content (only copies of one model are "
                         "in the compiled rollout)")
    if compiled.nstate != nstate:
        raise InputError(f"mujoco_rollout: initial_state: {nstate} numbers per state, the compiled model takes "
                         f"{compiled.nstate}")
    state0 = np.ascontiguousarray(mr._tile_if_required(initial_state, nbatch), dtype=float)
    warm0 = None if initial_warmstart is None else np.ascontiguousarray(mr._tile_if_required(initial_warmstart, nbatch),
                                                                         dtype=float)
    u = np.zeros((nbatch, nstep, ncontrol)) if control is None else mr._tile_if_required(control, nbatch, nstep)
    u = np.ascontiguousarray(u, dtype=float)
    if not with_ctrl and m.nu:          # the C reads ctrl first: zeros where control_spec leaves it out
        u = np.ascontiguousarray(np.concatenate([np.zeros((nbatch, nstep, m.nu)), u], axis=2))
    states, sensors, status = compiled.run(state0, warm0, u, nstep, nthread, with_qfrc)
    if report is not None:
        report(status)
    if out_state is not None:
        out_state[...] = states
        states = out_state
    if out_sensor is not None:
        out_sensor[...] = sensors
        sensors = out_sensor
    return states, sensors, status
