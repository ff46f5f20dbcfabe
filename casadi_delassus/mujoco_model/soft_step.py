"""MuJoCo's soft contact model on the compiled step, its mathematics (its C: codegen/mujoco_step.py, loaded and called
by runtime/mujoco_step.py, ``cd.mujoco_contact_step`` in mujoco/step.py): for one MJCF robot and its contact points,
a C function

    <name>_soft(q, v, tau, frames, friction, dims, offsets, R, B, Kr, force_warm, opts, out qacc, out force, out info)

that returns MuJoCo's contact forces (``efc_force``; condim 1, 3, 4 and 6, elliptic or pyramidal
cone) and ``qacc``: the unconstrained acceleration a₀, G = J M⁻¹ Jᵀ, J v and J a₀ come from the
contact step's per-robot SX (contact/step.py, ``step_functions``: ABA, the registry's cheapest Delassus
algorithm, the staged M⁻¹ Jᵀ λ), and codegen/templates/mujoco_step.c.j2 forms MuJoCo's efc rows and
solves min ½ fᵀ(A + R)f + fᵀ(E J a₀ − a_ref) over the cone by ADMM (soft_contacts.py has the
problem and MuJoCo's R and a_ref; Todorov 2014, ICRA).

q, v and τ are MuJoCo's qpos, qvel and qfrc_applied.  A contact is ``LINK:6d-world`` (the
link origin's world-aligned velocity and angular velocity; the contact point is a run-time
world offset from the origin, so one step serves every state) or the cheaper fixed point
``LINK:3d-world@x,y,z`` (in the link's frame, condim up to 3); each contact's frame, condim,
friction, distance and solver parameters are run-time inputs (``mujoco_contacts``)."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..errors import ConstraintError
from ..model.mjcf import body_name, mujoco_module
from ..contact.step import step_functions
from .soft_contacts import soft_rows


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
    """(R, B, Kr) per efc row for ``contacts`` under ``model.opt`` (soft_contacts.soft_rows)."""
    mujoco = mujoco_module()
    refsafe = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_REFSAFE
    return soft_rows(contacts.dist, contacts.margin, contacts.solref, contacts.solimp, contacts.friction,
                     contacts.dims, contacts.weight, model.opt.impratio, model.opt.timestep, pyramidal, refsafe,
                     contacts.solreffriction)


def soft_functions(robot, cs, name, delassus):
    """(prep, post): ``<name>_prep(q, v, tau)`` → a₀, G, J v, J a₀ and the
    stored q-only part of ``<name>_post(lam, w)`` = M⁻¹ Jᵀ λ, from the contact step's SX at
    dt = 1 (v_free − v = a₀) and dt = 0 (g = J v); G by ``delassus`` (a Delassus algorithm's function, as
    contact/step.py's step_functions takes it)."""
    step_prep, post = step_functions(robot, cs, name, delassus)
    q, v, tau = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv)))
    v_free, G, g1, w = step_prep(q, v, tau, 1)
    jv = step_prep(q, v, tau, 0)[2]
    prep = ca.Function(f"{name}_prep", [q, v, tau], ca.cse([v_free - v, G, jv, g1 - jv, w]),
                       ["q", "v", "tau"], ["a0", "G", "Jv", "Ja0", "w"])
    return prep, post


@dataclass(frozen=True)
class SoftResult:
    """MuJoCo's efc_force of the contacts' rows (``rows_per_contact`` each, MuJoCo's order), qacc,
    and the solve's iterations, residuals (primal, dual) and status."""
    force: np.ndarray
    qacc: np.ndarray
    iterations: int
    residuals: tuple
    status: str

