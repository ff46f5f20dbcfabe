"""``casadi-delassus simulate model.xml``: an MJCF model stepped by ``cd.mujoco_rollout`` (mujoco/rollout.py) with the
physics its file states — time step, integrator, actuators, joint limits and friction loss, contacts between its geoms
and its floor — under constant actuator controls, and its trajectory as a CSV table and a figure (issue 32).

``cd.simulate`` (``simulate`` here) is the per-step loop of both kinds of model: a Pinocchio-layout robot with
hand-listed contact points runs simulation/simulate.py's loop; an MJCF model (its file, an MjModel, or a Robot loaded
from its file) on the compiled step runs ``simulate_steps``: the compiled MuJoCo rollout one step per call (nstep = 1)
under a controller of MuJoCo's actuator inputs, the warm start carried from call to call as MuJoCo carries
qacc_warmstart (the C entry's warm_out), so that the steps are those of one cd.mujoco_rollout call bit for bit when the
controls are the same.

The contact step of simulation/ takes Pinocchio's q layout and hand-listed contact points; an MJCF model needs neither:
its contacts, solver settings and actuators are MuJoCo's, compiled per model by cd.mujoco_rollout.
"""
from __future__ import annotations

import csv
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..model import Robot, RobotLike
from ..model.mjcf import compile_mjcf, mujoco_module
from ..names import shown
from ..progress import counted, silenced
from ..simulation.simulate import Rollout, step_count
from ..simulation.simulate import simulate as simulate_robot
from ..simulation.rollout_io import pyplot, save_figure, side_legend, write_atomic
from ..runtime.mujoco_rollout import CONVERGED, DIVERGED, MAX_ITERATIONS, STATUS
from .rollout import DEFAULT_OUT, _compiled, rollout_status


@dataclass
class ModelTrajectory:
    """One MJCF rollout: qpos (n+1 x nq) and qvel (n+1 x nv) from the initial state on (after a divergence the CLI's
    one C call repeats the last state in the remaining rows, as mujoco.rollout does, while cd.simulate's loop stops:
    k rows when its k-th step diverged), ``ctrl`` (nu: constant, the CLI's; n x nu: each step's, cd.simulate's),
    sensordata (n x nsensordata, as mujoco.rollout records it), and the columns' names."""
    name: str
    dt: float
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    sensordata: np.ndarray
    outcome: int            # runtime/mujoco_rollout.py's code: CONVERGED, MAX_ITERATIONS (some step's solve) or DIVERGED
    qpos_names: list
    qvel_names: list
    ctrl_names: list
    sensor_names: list

    @property
    def diverged(self) -> bool:
        """Whether MuJoCo's rule (a NaN or a value beyond 1e10) stopped the trajectory."""
        return self.outcome == DIVERGED

    @property
    def status(self) -> str:
        """"ok", "max iterations" (some step's constraint solve stopped at its limit) or "diverged"."""
        return "ok" if self.outcome == CONVERGED else STATUS[self.outcome]


def _object_name(mujoco, m, kind, i, fallback):
    """The name of object ``i`` of ``kind`` (mjtObj), or ``fallback<i>`` for an unnamed one."""
    return mujoco.mj_id2name(m, kind, i) or f"{fallback}{i}"


def coordinate_names(mujoco, m):
    """(qpos names, qvel names) by joint, MuJoCo's order: a free joint's ``name.x y z qw qx qy qz`` and
    ``name.vx vy vz wx wy wz`` (world-frame linear velocity), a ball's ``name.qw qx qy qz`` and ``name.wx wy wz``."""
    parts = {int(mujoco.mjtJoint.mjJNT_FREE): (("x", "y", "z", "qw", "qx", "qy", "qz"), ("vx", "vy", "vz", "wx", "wy", "wz")),
             int(mujoco.mjtJoint.mjJNT_BALL): (("qw", "qx", "qy", "qz"), ("wx", "wy", "wz"))}
    qn, vn = [], []
    for j in range(m.njnt):
        name = _object_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
        qs, vs = parts.get(int(m.jnt_type[j]), ((None,), (None,)))
        qn += [name if s is None else f"{name}.{s}" for s in qs]
        vn += [name if s is None else f"{name}.{s}" for s in vs]
    return qn, vn


def sensor_names(mujoco, m):
    """One name per sensordata entry: the sensor's name, ``.k`` for each entry of a sensor of several."""
    names = []
    for s in range(m.nsensor):
        name = _object_name(mujoco, m, mujoco.mjtObj.mjOBJ_SENSOR, s, "sensor")
        dim = int(m.sensor_dim[s])
        names += [name] if dim == 1 else [f"{name}.{k}" for k in range(dim)]
    return names


def _initial_data(mujoco, m, qpos, keyframe, qpos_name="--q0"):
    """MjData at the model's qpos0, at ``keyframe`` (a name or an index), and then at ``qpos`` (named ``qpos_name`` in
    its refusal) when given."""
    d = mujoco.MjData(m)
    if keyframe is not None:
        k = int(keyframe) if str(keyframe).isdigit() else mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, str(keyframe))
        if not 0 <= k < m.nkey:
            raise InputError(f"unknown keyframe {shown(keyframe)} of the model ({m.nkey} keyframes)")
        mujoco.mj_resetDataKeyframe(m, d, k)
    if qpos is not None:
        qpos = np.asarray(qpos, dtype=float)
        if qpos.shape != (m.nq,) or not np.all(np.isfinite(qpos)):
            raise InputError(f"{qpos_name} must be {m.nq} finite numbers (the model's nq), got {qpos.size}")
        d.qpos[:] = qpos
    return d


def simulate_model(model, duration, ctrl=None, qpos=None, keyframe=None, out_dir=DEFAULT_OUT, cc=None):
    """The ModelTrajectory of the MJCF file ``model`` (a path) over ``duration`` seconds at its own time step,
    from its qpos0, ``keyframe`` or ``qpos`` at rest, under the constant controls ``ctrl`` (nu numbers; default 0)."""
    mujoco = mujoco_module()
    m = compile_mjcf(path=Path(model))
    n = step_count(duration, float(m.opt.timestep), 8 * (1 + m.nq + m.nv + m.nsensordata))  # states and sensors
    u = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, dtype=float)
    if u.shape != (m.nu,) or not np.all(np.isfinite(u)):
        raise InputError(f"--ctrl must be {m.nu} finite numbers (the model's actuators), got {u.size}")
    state0 = _initial_state(mujoco, m, qpos, None, keyframe, "--q0")[0]
    state, sens, status = rollout_status(m, mujoco.MjData(m), state0[None], np.broadcast_to(u, (1, n, m.nu)), nstep=n,
                                         out_dir=out_dir, cc=cc)        # no warning: the status says it
    qpos_t = np.vstack([state0[1:1 + m.nq], state[0, :, 1:1 + m.nq]])
    qvel_t = np.vstack([state0[1 + m.nq:1 + m.nq + m.nv], state[0, :, 1 + m.nq:1 + m.nq + m.nv]])
    return ModelTrajectory(Path(model).stem, float(m.opt.timestep), qpos_t, qvel_t, u, sens[0],
                           int(status[0]), *column_names(mujoco, m))


def column_names(mujoco, m):
    """(qpos names, qvel names, actuator names, sensordata names) of a ModelTrajectory of MjModel ``m``."""
    actuators = [_object_name(mujoco, m, mujoco.mjtObj.mjOBJ_ACTUATOR, a, "actuator") for a in range(m.nu)]
    return (*coordinate_names(mujoco, m), actuators, sensor_names(mujoco, m))


# cd.simulate's options of an MJCF model: the others (ground, friction, solver, tolerance, Baumgarte, build options of
# the contact step) are the model's own or the Pinocchio-layout loop's, and refused
MJCF_OPTIONS = ("keyframe", "out_dir", "cc", "quiet")


def simulate(robot: Any, contacts: str | Sequence[str] | None = None, q0: npt.ArrayLike | None = None,
             v0: npt.ArrayLike | None = None, T: float | None = None, dt: float | None = None,
             controller: Callable[[float, np.ndarray, np.ndarray], npt.ArrayLike] | None = None,
             step: str = "compiled", solver: str = "auto", **options: Any) -> Rollout | ModelTrajectory:
    """``cd.simulate``.  A robot of Pinocchio's q layout (a Robot, a name, a URDF …; or any robot on
    step="reference"): simulation/simulate.py's ``simulate(robot, contacts, q0, v0, T, dt, controller, …)`` → Rollout,
    ``controller(t, q, v)`` → joint torques.  An MJCF model on the compiled step (its file, an MjModel, or a Robot
    loaded from its file): ``simulate_steps`` → ModelTrajectory, ``controller(t, qpos, qvel)`` → ctrl (MuJoCo's
    actuator inputs, not joint torques), q0/v0 its qpos/qvel, dt None or the model's own time step, its own
    contacts (``contacts`` refused), options ``keyframe``, ``out_dir``, ``cc``, ``quiet``; ``solver`` the contact
    solver of the Pinocchio-layout route ("auto", its default; an MJCF model solves MuJoCo's problem its own way)."""
    if step == "compiled" and _is_mjcf(robot):
        return _simulate_mjcf(robot, contacts, q0, v0, T, dt, controller,
                              options if solver == "auto" else {**options, "solver": solver})
    missing = [n for n, x in (("contacts", contacts), ("q0", q0), ("v0", v0), ("T", T), ("dt", dt)) if x is None]
    if missing or "keyframe" in options:
        raise InputError(f"cd.simulate of a robot of Pinocchio's q layout takes contacts, q0, v0, T and dt (missing: "
                         f"{', '.join(missing)})" if missing else "keyframe is an MJCF model's (cd.simulate(model.xml))")
    return simulate_robot(robot, contacts, q0, v0, T, dt, controller, step=step, solver=solver, **options)  # type: ignore[arg-type]


def _is_mjcf(robot):
    """Whether ``robot`` is an MJCF model: an MjModel, an MJCF file, or a Robot loaded from one."""
    if type(robot).__name__ == "MjModel" and type(robot).__module__.split(".")[0] == "mujoco":
        return True
    if isinstance(robot, Robot):
        return getattr(robot, "model_format", None) == "mjcf"
    from ..model import file_format, on_disk
    return isinstance(robot, (str, Path)) and not str(robot).lstrip().startswith("<") and on_disk(robot) and \
        file_format(Path(robot)) == "mjcf"


def _simulate_mjcf(robot, contacts, q0, v0, T, dt, controller, options):
    """cd.simulate's MJCF route: what the model states itself refused in one line, then simulate_steps."""
    if contacts is not None:
        raise InputError("an MJCF model on the compiled step has its own contacts (MuJoCo's, from its file): leave "
                         "contacts out (hand-listed candidates run on step='reference')")
    given = sorted(k for k in options if k not in MJCF_OPTIONS)
    if given:
        raise InputError(f"an MJCF model runs the physics its file states: {', '.join(given)} not taken (its floor, "
                         f"friction, solver and tolerance are the model's; options: {', '.join(MJCF_OPTIONS)})")
    if T is None:
        raise InputError("cd.simulate of an MJCF model takes T (the duration, s)")
    with silenced(options.get("quiet", False)):
        return simulate_steps(robot, T, controller, q0, v0, dt, options.get("keyframe"),
                              options.get("out_dir", DEFAULT_OUT), options.get("cc"))


def _mjmodel(mujoco, model):
    """(MjModel, name) of an MJCF file, an MjModel or a Robot loaded from an MJCF file."""
    if isinstance(model, mujoco.MjModel):
        name = model.names.split(b"\0", 1)[0].decode()
        return model, "mjcf" if name in ("", "MuJoCo Model") else name
    path = getattr(model, "model_file", None) if isinstance(model, Robot) else Path(model)
    if path is None:
        raise InputError(f"robot {model.name!r} was read from MJCF text: give cd.simulate its file or its MjModel")
    return compile_mjcf(path=Path(path)), Path(path).stem


def _ctrl(controller, t, qpos, qvel, nu, k):
    """The controller's ctrl at step k (zeros without one), checked: nu finite numbers."""
    if controller is None:
        return np.zeros(nu)
    u = np.asarray(controller(t, qpos.copy(), qvel.copy()), dtype=float).reshape(-1)
    if u.shape != (nu,) or not np.all(np.isfinite(u)):
        raise InputError(f"the controller's ctrl at step {k} (t = {t:.6g} s) must be {nu} finite numbers (the model's "
                         f"actuator inputs), got {u.size}{'' if u.shape != (nu,) else ' with a non-finite one'}")
    return u


def _initial_state(mujoco, m, qpos, qvel, keyframe, qpos_name="q0 (qpos)"):
    """The FULLPHYSICS state (1 x nstate) at qpos0, ``keyframe`` or ``qpos`` (named ``qpos_name`` in its refusal), with
    velocity ``qvel`` (None: the keyframe's or 0), each checked."""
    d = _initial_data(mujoco, m, qpos, keyframe, qpos_name)
    if qvel is not None:
        qvel = np.asarray(qvel, dtype=float)
        if qvel.shape != (m.nv,) or not np.all(np.isfinite(qvel)):
            raise InputError(f"v0 (qvel) must be {m.nv} finite numbers (the model's nv), got {qvel.size}")
        d.qvel[:] = qvel
    state = np.empty((1, mujoco.mj_stateSize(m, int(mujoco.mjtState.mjSTATE_FULLPHYSICS))))
    mujoco.mj_getState(m, d, state[0], int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
    return state


def simulate_steps(model, T, controller=None, qpos=None, qvel=None, dt=None, keyframe=None, out_dir=DEFAULT_OUT,
                   cc=None):
    """The ModelTrajectory of the MJCF ``model`` (a file, an MjModel or a Robot loaded from a file) over T seconds at
    its own time step (``dt``: None or that one), from its qpos0, ``keyframe`` or ``qpos`` with velocity ``qvel``
    (default 0), under ``controller(t, qpos, qvel) -> ctrl`` (nu actuator inputs, clamped to their ranges as MuJoCo
    does; zeros when None), one call of the compiled rollout per step with the warm start carried between calls.
    A step that diverges (MuJoCo's rule) ends the trajectory (``diverged``); steps whose solve stopped at the model's
    iteration limit are named in a RuntimeWarning, as cd.mujoco_rollout does."""
    mujoco = mujoco_module()
    m, name = _mjmodel(mujoco, model)
    step_dt = float(m.opt.timestep)
    if dt is not None and dt != step_dt:
        raise InputError(f"dt = {shown(dt)}: an MJCF model steps at its own time step, {step_dt!r} s (option "
                         f"timestep); give dt=None or that one")
    n = step_count(T, step_dt, 8 * (1 + m.nq + m.nv + m.nu + m.nsensordata))
    state = _initial_state(mujoco, m, qpos, qvel, keyframe)
    compiled = _compiled(m, out_dir, cc)[1]
    if compiled.nstate != state.shape[1]:
        raise InputError(f"the model's state has {state.shape[1]} numbers; the compiled rollout takes {compiled.nstate}")
    q, v = slice(1, 1 + m.nq), slice(1 + m.nq, 1 + m.nq + m.nv)
    warm, next_warm = np.zeros((1, m.nv)), np.zeros((1, m.nv))
    states, ctrls, sensors, capped, diverged = [state[0]], [], [], [], False
    for k in counted(n, "steps"):
        u = _ctrl(controller, float(state[0, 0]), state[0, q], state[0, v], m.nu, k)
        out, sens, status = compiled.run(state, warm, u.reshape(1, 1, -1), 1, 1, False, next_warm)
        ctrls.append(u)
        sensors.append(sens[0, 0])
        if status[0] == DIVERGED:
            diverged = True
            break
        capped += [k] if status[0] == MAX_ITERATIONS else []
        state, (warm, next_warm) = np.ascontiguousarray(out[:, 0]), (next_warm, warm)
        states.append(state[0])
    if capped:
        warnings.warn(f"cd.simulate: the constraint solve of steps {capped[:8]}{' ...' if len(capped) > 8 else ''} "
                      f"stopped at its iteration limit", RuntimeWarning, stacklevel=3)
    x = np.array(states)
    return ModelTrajectory(name, step_dt, x[:, q], x[:, v], np.array(ctrls).reshape(len(ctrls), m.nu),
                           np.array(sensors).reshape(len(sensors), m.nsensordata),
                           DIVERGED if diverged else MAX_ITERATIONS if capped else CONVERGED, *column_names(mujoco, m))


def write_csv(traj, path):
    """The trajectory as CSV at ``path`` (one row per step: the state it started from, the controls, the sensors
    mujoco.rollout recorded for it); returns the path."""
    header = (["t"] + traj.qpos_names + [f"v_{n}" for n in traj.qvel_names] + [f"ctrl_{n}" for n in traj.ctrl_names]
              + [f"sensor_{n}" for n in traj.sensor_names])

    def write(f):
        w = csv.writer(f)
        w.writerow(header)
        ctrl = np.broadcast_to(traj.ctrl, (len(traj.sensordata), len(traj.ctrl_names)))
        for k in range(len(traj.sensordata)):
            w.writerow([f"{k * traj.dt:.9g}"] + [repr(float(x)) for x in np.concatenate(
                [traj.qpos[k], traj.qvel[k], ctrl[k], traj.sensordata[k]])])
    return write_atomic(path, write)


def plot(traj, path):
    """A figure: the first free joint's height, the hinge and slide positions and their velocities over time."""
    plt = pyplot()
    t = traj.dt * np.arange(len(traj.qpos))
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    height = next((i for i, n in enumerate(traj.qpos_names) if n.endswith(".z")), None)
    axes[0].plot(t, traj.qpos[:, height] if height is not None else np.full(len(t), np.nan))
    axes[0].set_ylabel("free body height (m)")
    scalar_q = [i for i, n in enumerate(traj.qpos_names) if "." not in n]
    scalar_v = [i for i, n in enumerate(traj.qvel_names) if "." not in n]
    for ax, x, columns, names in ((axes[1], traj.qpos, scalar_q, traj.qpos_names),
                                  (axes[2], traj.qvel, scalar_v, traj.qvel_names)):
        for i in columns:
            ax.plot(t, x[:, i], lw=0.8, label=names[i])
        side_legend(ax, len(columns))
    axes[1].set_ylabel("joint positions (rad, m)")
    axes[2].set_ylabel("joint velocities (rad/s, m/s)")
    axes[2].set_xlabel("time (s)")
    fig.suptitle(f"{traj.name}: {len(traj.sensordata)} steps of {traj.dt:g} s, {traj.status}")
    return save_figure(plt, fig, path)
