"""MuJoCo's soft contact model on the compiled step: for one MJCF robot and its contact points,
a C function

    <name>_soft(q, v, tau, frames, friction, dims, offsets, R, B, Kr, force_warm, opts, out qacc, out force, out info)

that returns MuJoCo's contact forces (``efc_force``; condim 1, 3, 4 and 6, elliptic or pyramidal
cone) and ``qacc``: the unconstrained acceleration a₀, G = J M⁻¹ Jᵀ, J v and J a₀ come from the
contact step's per-robot SX (step.py, ``step_functions``: ABA, the registry's cheapest Delassus
algorithm, the staged M⁻¹ Jᵀ λ), and templates/mujoco_step.c.j2 forms MuJoCo's efc rows and
solves min ½ fᵀ(A + R)f + fᵀ(E J a₀ − a_ref) over the cone by ADMM (mujoco_soft.py has the
problem and MuJoCo's R and a_ref; Todorov 2014, ICRA).

q, v and τ are MuJoCo's qpos, qvel and qfrc_applied.  A contact is ``LINK:6d-world`` (the
link origin's world-aligned velocity and angular velocity; the contact point is a run-time
world offset from the origin, so one step serves every state) or the cheaper fixed point
``LINK:3d-world@x,y,z`` (in the link's frame, condim up to 3); each contact's frame, condim,
friction, distance and solver parameters are run-time inputs (``mujoco_contacts``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from ..version import __version__
from ..codegen import schedule, sincos
from ..codegen.build import BUILT_KINDS, build_cached
from ..runtime.library import entries, open_sealed
from ..codegen.emit import TEMPLATES as CODEGEN_TEMPLATES, casadi_source
from ..codegen.escape import Safe
from ..constraints import ConstraintSet
from ..errors import ConstraintError, InputError
from ..model.mjcf import _model_name as model_name, body_name, mujoco_module, robot_from_mjmodel
from ..registry import AUTO
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..runtime.inputs import real_array
from .mujoco_soft import rows_per_contact, soft_rows
from .mujoco_soft_admm import STATUS
from .result import SOFT_DEFAULTS, SOFT_OPTIONS, Options
from .step import (DEFAULT_OUT, DOUBLE_P, NORMAL_TOL, TEMPLATES, build_key, c_pointer, check_q, check_state,
                   scenario_name, step_functions)


@dataclass(frozen=True)
class MujocoContacts:
    """MuJoCo's active contacts against the world, one entry each: our spec (``BODY:6d-world``,
    or the fixed point ``BODY:3d-world@p``), the contact point's world offset from the body
    origin, the frame whose rows (n, t₁, t₂) act on the robot point's world velocity, and MuJoCo's
    contact parameters."""
    specs: list
    offsets: np.ndarray
    frames: np.ndarray
    friction: np.ndarray
    dims: np.ndarray
    dist: np.ndarray
    margin: np.ndarray
    solref: np.ndarray
    solimp: np.ndarray
    weight: np.ndarray
    solreffriction: np.ndarray


def mujoco_contacts(model, data, fixed_points=False):
    """The MujocoContacts of ``data.contact`` (after ``mj_forward`` or ``mj_collision``): contacts
    between one robot body and the world (anything else is a ConstraintError).  ``fixed_points``:
    contacts up to condim 3 become points fixed in their bodies (3 rows instead of 6, but the
    step then holds for this state's contact points only)."""
    rows = []
    for i in range(data.ncon):
        c = data.contact[i]
        if c.exclude:
            continue
        bodies = [int(model.geom_bodyid[g]) for g in c.geom]
        static = [int(model.body_weldid[x]) == 0 for x in bodies]       # the world and bodies welded to it
        if static.count(True) != 1:
            raise ConstraintError(f"contact {i}: the MuJoCo contact step takes contacts between a robot body and the "
                                  f"world, got one between bodies {bodies}")
        b = bodies[static.index(False)]
        offset = c.pos - data.xpos[b]
        point = data.xmat[b].reshape(3, 3).T @ offset
        frame = c.frame.reshape(3, 3) * (1.0 if bodies[1] == b else -1.0)    # rows act on v(body 2) − v(body 1)
        name = body_name(model, b)
        fixed = fixed_points and c.dim <= 3
        spec = f"{name}:3d-world@{','.join(repr(float(x)) for x in point)}" if fixed else f"{name}:6d-world"
        rows.append((spec, offset, frame.ravel(),
                     c.friction, c.dim, c.dist, c.includemargin, c.solref, c.solimp,
                     model.body_invweight0[bodies, 0].sum(), c.solreffriction))
    if not rows:
        raise ConstraintError("no active contact in data.contact")
    specs, *arrays = zip(*rows)
    return MujocoContacts(list(specs), *(np.array(a, float) for a in arrays))


def contact_blocks(cs):
    """Each contact's world rows: 3 (a fixed point ``LINK:3d-world@p``) or 6 (``LINK:6d-world``,
    the point given at run time); a ConstraintError for anything else."""
    sizes = {"3d-world": 3, "6d-world": 6}
    wrong = [c.spec for c in cs.constraints if c.kind not in sizes]
    if wrong:
        raise ConstraintError(f"contact {wrong[0]!r}: the MuJoCo contact step takes LINK:6d-world or fixed points "
                              "LINK:3d-world@x,y,z")
    return [sizes[c.kind] for c in cs.constraints]


def soft_parameters(model, contacts, pyramidal):
    """(R, B, Kr) per efc row for ``contacts`` under ``model.opt`` (mujoco_soft.soft_rows)."""
    mujoco = mujoco_module()
    refsafe = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    return soft_rows(contacts.dist, contacts.margin, contacts.solref, contacts.solimp, contacts.friction,
                     contacts.dims, contacts.weight, model.opt.impratio, model.opt.timestep, pyramidal, refsafe,
                     contacts.solreffriction)


def soft_functions(robot, cs, name, delassus=AUTO):
    """(prep, post, Delassus algorithm): ``<name>_prep(q, v, tau)`` → a₀, G, J v, J a₀ and the
    stored q-only part of ``<name>_post(lam, w)`` = M⁻¹ Jᵀ λ, from the contact step's SX at
    dt = 1 (v_free − v = a₀) and dt = 0 (g = J v)."""
    step_prep, post, chosen = step_functions(robot, cs, name, delassus)
    q, v, tau = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv)))
    v_free, G, g1, w = step_prep(q, v, tau, 1)
    jv = step_prep(q, v, tau, 0)[2]
    prep = ca.Function(f"{name}_prep", [q, v, tau], ca.cse([v_free - v, G, jv, g1 - jv, w]),
                       ["q", "v", "tau"], ["a0", "G", "Jv", "Ja0", "w"])
    return prep, post, chosen


def render(robot, cs, name, prep, post, delassus):
    """The C source of the MuJoCo-model step."""
    sizes = {k: max(int(getattr(f, k)()) for f in (prep, post)) for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}
    ne = contact_blocks(cs)
    code = sincos.hoist(schedule.reorder(casadi_source(prep, [post])), CODEGEN_TEMPLATES)[0]
    return TEMPLATES.get_template("mujoco_step.c.j2").render(
        fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__, delassus=delassus,
        casadi_code=Safe(code), nv=robot.nv, nc=len(ne), mw=cs.m, mmax=sum(10 if k == 6 else 4 for k in ne),
        woff=np.cumsum([0] + ne[:-1]).tolist(), ne=ne, nw=int(prep.numel_out(4)), options=SOFT_OPTIONS,
        **sizes)


def build(robot, cs, out_dir, cflags, cc, delassus):
    """Compile the step (cached by a hash of everything that determines it); returns its manifest's path (sealed:
    load it with runtime/library.open_sealed)."""
    cc = find_compiler(cc)
    scenario = scenario_name("mjsoft", cs.specs)
    name = artifact.function_name(artifact.model_name(robot, None), scenario, "mjsoft")
    key = build_key(robot, cs, cflags, cc, delassus=delassus)

    def make():
        prep, post, chosen = soft_functions(robot, cs, name, delassus)
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": chosen, "nq": robot.nq,
                    "nv": robot.nv, "nc": len(contact_blocks(cs)), "cflags": list(cflags),
                    "version": __version__}
        return render(robot, cs, name, prep, post, chosen), cflags, manifest
    return build_cached(artifact.folder(out_dir, artifact.model_name(robot, None), scenario), f"mjsoft_{key[:16]}",
                        make, cc, key, "mjsoft")


@dataclass(frozen=True)
class SoftResult:
    """MuJoCo's efc_force of the contacts' rows (``rows_per_contact`` each, MuJoCo's order), qacc,
    and the solve's iterations, residuals (primal, dual) and status."""
    force: np.ndarray
    qacc: np.ndarray
    iterations: int
    residuals: tuple
    status: str


class MujocoContactStep:
    """A compiled step solving MuJoCo's soft contact problem for one robot and contact set
    (``mujoco_contact_step``)."""

    def __init__(self, model, contacts, out_dir=DEFAULT_OUT, cflags=("-O2",), cc=None, delassus=AUTO, name=None):
        if not isinstance(model, mujoco_module().MjModel):
            raise InputError(f"model: expected a mujoco.MjModel, got {type(model).__name__}")
        self.robot = robot_from_mjmodel(model, name or model_name(model) or "mjcf")
        self.contacts = ConstraintSet.parse(self.robot, list(contacts))
        self.blocks = contact_blocks(self.contacts)
        self.nc = len(self.blocks)
        path = build(self.robot, self.contacts, out_dir, tuple(cflags), cc, delassus)
        self.so = path.with_suffix(".so")
        self.manifest, self._lib, mapped = open_sealed(path, BUILT_KINDS, "mjsoft")
        self._soft, = entries(self._lib, mapped, self.so, self.manifest["function"], [("_soft", [DOUBLE_P] * 15)])

    def _dims(self, dims):
        """condim per contact, checked against its rows: 1 or 3 on a fixed point, 1, 3, 4 or 6 on a 6d-world contact."""
        d = np.ascontiguousarray(real_array("dims", dims), dtype=float).ravel()
        ok = {3: (1, 3), 6: (1, 3, 4, 6)}
        if d.size != self.nc or any(x not in ok[k] for x, k in zip(d, self.blocks)):
            raise InputError(f"dims: expected a condim per contact, 1 or 3 for a fixed point, 1, 3, 4 or 6 for a "
                             f"6d-world contact, got {d.tolist()}"[:300])
        return d

    @staticmethod
    def _warm(force, m):
        """The warm start: m finite forces."""
        return check_state("force_warm", real_array("force_warm", force).ravel(), m)

    def _frames(self, frames):
        """The contacts' frames (n_c × 3 × 3), each with orthonormal rows (to NORMAL_TOL, as the step's normals): a
        zero or scaled frame scales the efc rows, and with them every force."""
        F = check_state("frames", real_array("frames", frames).ravel(), 9 * self.nc).reshape(-1, 3, 3)
        off = np.abs(F @ F.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2))
        if np.any(off > NORMAL_TOL):
            raise InputError(f"frames: contact {int(np.argmax(off))}'s frame is not orthonormal (F Fᵀ off the identity "
                             f"by {off.max():.3g} > {NORMAL_TOL:g})")
        return F.ravel()

    @staticmethod
    def _friction(friction, dims):
        """MuJoCo's friction per contact (n_c × 5), each ≥ 0 and those the condim uses (the first condim − 1) > 0, as
        MuJoCo clamps them (a negative μ was read as |μ|; a zero one divides the elliptic cone's rows by 0)."""
        f = check_state("friction", real_array("friction", friction).ravel(), 5 * len(dims)).reshape(-1, 5)
        used = np.arange(5) < (np.asarray(dims)[:, None] - 1)
        if np.any(f < 0) or np.any(f[used] <= 0):
            raise InputError("friction: every coefficient must be >= 0, and those the condim uses (the first "
                             f"condim - 1 of each contact) > 0, got {f.tolist()}"[:300])
        return f.ravel()

    def __call__(self, q, v, tau, frames, friction, dims, offsets, R, B, Kr, pyramidal=False, force_warm=None,
                 tol=SOFT_DEFAULTS.tol, max_iter=SOFT_DEFAULTS.max_iter, rho=SOFT_DEFAULTS.rho):
        """(force, qacc) of MuJoCo's problem at (q, v, τ) = (qpos, qvel, qfrc_applied) for the
        contacts' frames (n_c × 3 × 3, orthonormal rows), friction (n_c × 5), condim, world offsets of the points from
        their body origins (n_c × 3; unused for fixed points) and the per-row R (> 0), B, Kr
        (``soft_parameters``).  ``tol`` (relative, finite and > 0), ``max_iter`` and ``rho`` are checked as the
        contact step's (result.py); q's quaternions as every q (step.check_q).  The status is "not finite" whenever a
        force or qacc is (a huge warm start overflows)."""
        dims = self._dims(dims)
        m, r = int(rows_per_contact(dims, pyramidal).sum()), self.robot
        opts = Options(tol, max_iter, rho).packed(SOFT_OPTIONS, pyramidal=bool(pyramidal))
        arrays = [check_q(r, real_array("q", q).ravel())]
        arrays += [check_state(n, real_array(n, x).ravel(), k) for n, x, k in (("v", v, r.nv), ("tau", tau, r.nv))]
        arrays += [self._frames(frames), self._friction(friction, dims), dims,
                   check_state("offsets", real_array("offsets", offsets).ravel(), 3 * self.nc)]
        arrays += [check_state(n, real_array(n, x).ravel(), m) for n, x in (("R", R), ("B", B), ("Kr", Kr))]
        if not np.all(arrays[7] > 0):
            raise InputError(f"R: must be > 0 (MuJoCo's regularisation), got {arrays[7].min():g} at row "
                             f"{int(np.argmin(arrays[7]))}")
        warm = None if force_warm is None else self._warm(force_warm, m)
        qacc, force, info = np.empty(r.nv), np.empty(m), np.empty(4)
        ptr = c_pointer
        if self._soft(*map(ptr, arrays), ptr(warm), ptr(opts), ptr(qacc), ptr(force), ptr(info)):
            raise InputError("the generated MuJoCo contact step failed to evaluate")
        return SoftResult(force, qacc, int(info[0]), (float(info[1]), float(info[2])), STATUS[int(info[3])])

    def solve(self, model, data, **options):
        """MuJoCo's efc_force (contact rows) and qacc for ``data``'s state and contacts, the cone
        of ``model.opt.cone``: the contacts must be the ones this step was built for."""
        contacts = mujoco_contacts(model, data, fixed_points=3 in self.blocks)
        if contacts.specs != self.contacts.specs:
            raise ConstraintError("data.contact differs from the contacts this step was built for")
        pyramidal = model.opt.cone == mujoco_module().mjtCone.mjCONE_PYRAMIDAL
        return self(data.qpos, data.qvel, data.qfrc_applied, contacts.frames, contacts.friction, contacts.dims,
                    contacts.offsets, *soft_parameters(model, contacts, pyramidal), pyramidal=pyramidal, **options)


def mujoco_contact_step(model: Any, contacts: Sequence[str], **build_options: Any) -> MujocoContactStep:
    """A compiled step for the robot of the MjModel ``model`` (its gravity and armature) and
    ``contacts`` (specs, e.g. ``mujoco_contacts(model, data).specs``): ``s.solve(model, data)``
    → SoftResult with MuJoCo's contact ``efc_force`` and ``qacc``.  ``build_options``: out_dir,
    cflags, cc, delassus, name (default: the model's <mujoco model>)."""
    return MujocoContactStep(model, contacts, **build_options)
