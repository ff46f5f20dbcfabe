"""The contact step's mathematics: for one robot and one set of point contacts, the SX of the C function

    <name>_step(q, v, tau, dt, mu[], normals, lambda_warm, opts, out v_next, out lambda, out sigma, out info)

that takes one velocity-level time step with frictional contact (Pinocchio 4's convention;
Carpentier et al. 2024, RSS): v_free = v + dt·ABA(q, v, τ), G = J M⁻¹ Jᵀ, g = J v_free, the
ADMM or PGS solve of contact/admm.py or contact/pgs.py for λ (an impulse, N·s) and
σ = Gλ + g, then v_next = v_free + M⁻¹ Jᵀ λ.  The per-robot parts are SX (``<name>_prep``: v_free, G by a
Delassus algorithm, g, and the stored q-only part of ``<name>_post``: M⁻¹ Jᵀ λ by ABA with neither velocity nor
gravity, PV paper ../shared/papers/004_52dd6d88d839fc14.txt Sec. IV; ``<name>_factor`` and
``<name>_solve``: the damped inverse (G + ρI)⁻¹ of a Delassus operator, dense LDLᵀ or matrix-free,
contact/delassus_operator.py).  Which Delassus algorithm and which operator, the C around these parts and the build are the compile side's (codegen/contact_step.py, the
iteration loop in codegen/templates/contact_step.c.j2); loading and calling it the runtime's
(runtime/contact_step.py); ``cd.contact_step`` the entry (stepping/contact.py).

Contacts are point candidates ``LINK[@x,y,z]`` (contact/candidates.py; the constraint
``LINK:3d-world[@x,y,z]``: rows along world x,
y, z = [t₁, t₂, n] for the ground plane z = 0); a unit normal per contact given at run time
turns each contact's rows into the frame [t₁, t₂, n] of ``contact_frames``."""
from __future__ import annotations

import collections
import copy
import typing

import casadi as ca
import numpy as np

from ..constraints import ConstraintSet
from ..dynamics.aba import aba
from ..errors import ConstraintError
from ..symbolic.frames import local_transforms
from ..symbolic.staging import split
from ..sweeps.joint_space import constraint_jacobian
from . import SOLVERS
from .candidates import FORM, point_specs

STEP_SOLVERS = ("auto", *SOLVERS)


def contact_frames(normals):
    """R_i (n_c × 3 × 3, rows t₁, t₂, n) for unit normals n_i: t₁ is e_x (e_y when |n_x| > 0.9)
    with its n-component removed, normalised; t₂ = n × t₁.  For n = +z, R = I."""
    n = np.asarray(normals, dtype=float).reshape(-1, 3)
    e = np.where(np.abs(n[:, :1]) > 0.9, [0.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    t = e - np.sum(e * n, axis=1, keepdims=True) * n
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return np.stack([t, np.cross(n, t), n], axis=1)


def check_contacts(robot, contacts):
    """The ConstraintSet of the contacts: one or more point candidates (contact/candidates.py), nothing else."""
    specs = point_specs(robot, contacts)
    if not specs:
        raise ConstraintError(f"no contacts: give at least one contact candidate {FORM} (a point: no /r for the step)")
    cs = ConstraintSet.parse(robot, specs)
    if robot.q_convention != "pinocchio":
        raise ConstraintError(f"robot {robot.name!r}: the contact step takes models with Pinocchio's q layout "
                              f"(URDF, SDF, synthetic), not {robot.q_convention!r} ones; an MJCF model runs on cd.simulate(model.xml, "
                              f"T=…) with its own contacts, cd.mujoco_rollout or `casadi-delassus simulate model.xml` "
                              f"(docs/mujoco.md)")
    return cs


def auto_solver(cs, active=None):
    """The solver ``solver="auto"`` picks: ADMM when some body carries more than two point contacts (their rows then
    outnumber the body's six velocities: G is singular and PGS's sweeps crawl, as on talos_stand's eight sole
    corners), else PGS (go1's four feet: fewer iterations when contacts slide, cheaper sweeps); docs/contact.md has
    the bench's numbers.  ``active`` (a flag per contact; None: all): the contacts counted, an active set's pick."""
    per_body = collections.Counter(c.body for i, c in enumerate(cs.constraints) if active is None or active[i])
    return "admm" if max(per_body.values(), default=0) > 2 else "pgs"


def minv_apply(robot, cs, q, K_bodies, f):
    """M(q)⁻¹ f (SX): ABA without velocity and gravity."""
    still = copy.copy(robot)
    still.gravity = np.zeros(3)
    return aba(still, cs, q, K_bodies, ca.SX.zeros(robot.nv), f)["vdot"]


class StepTrace(typing.NamedTuple):
    """The step's SX traced once for one Delassus algorithm: prep's inputs and its outputs before any Delassus
    operator's, and post's λ stage (symbolic/staging.py)."""
    inputs: list
    outputs: list
    post_stage: typing.Any


def step_trace(robot, cs, delassus):
    """The StepTrace of the step, G by ``delassus`` (a Delassus algorithm's function (robot, cs, q, K_bodies) →
    {"delassus": G}: the registry's, codegen/contact_step.py picks it).  M⁻¹Jᵀλ is staged (symbolic/staging.py):
    what it needs of q alone (transforms, articulated inertias) is computed in prep, where cse shares it with ABA
    and the Delassus algorithm, and handed to post as the vector ``w``."""
    q, v, tau, dt, lam = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv),
                                                         ("dt", 1), ("lam", cs.m)))
    K_bodies = cs.symbolic_K_bodies(q, {})
    v_free = v + dt * aba(robot, cs, q, K_bodies, v, tau)["vdot"]
    G = delassus(robot, cs, q, K_bodies)["delassus"]
    T = local_transforms(robot, q)
    J = constraint_jacobian(robot, cs, T, K_bodies)    # unslid: v's own frames
    for i, body in enumerate(robot.bodies):            # MuJoCo's free joints: v_lin = E ṗ (sweeps/tree.py)
        if body.joint.mujoco_velocity:
            J[:, body.v_index:body.v_index + 3] = ca.mtimes(J[:, body.v_index:body.v_index + 3], T[i].X.E)
    dv = minv_apply(robot, cs, q, K_bodies, ca.mtimes(J.T, lam))
    first, last = split(ca.Function("post", [q, lam], [ca.densify(dv)], ["q", "lam"], ["dv"]),
                        [("q", ["q"]), ("lam", ["lam"])])
    return StepTrace([q, v, tau, dt], [ca.densify(v_free), ca.densify(G), ca.densify(J @ v_free), first.function(q)],
                     last)


def prep_function(trace, name, operator=None):
    """``<name>_prep(q, v, tau, dt)`` → v_free, G, g, w and what ``operator`` (contact/delassus_operator.py; None:
    nothing) adds to prep, its outputs alone."""
    extra = operator.prep_outputs(trace.inputs[0]) if operator is not None else {}
    return ca.Function(f"{name}_prep", trace.inputs, ca.cse([*trace.outputs, *extra.values()]),
                       ["q", "v", "tau", "dt"], ["v_free", "G", "g", "w", *extra])


def post_function(trace, name):
    """``<name>_post(lam, w)`` → dv = M⁻¹ Jᵀ λ from prep's stored ``w``."""
    stage = trace.post_stage.function
    return ca.Function(f"{name}_post", stage.sx_in(), ca.cse(stage.call(stage.sx_in())), ["lam", "w"], ["dv"])


def step_functions(robot, cs, name, delassus, operator=None):
    """(prep, post): the per-robot casadi.Functions of the step (step_trace), prep with what the Delassus
    ``operator`` (contact/delassus_operator.py; None: nothing) adds to it."""
    trace = step_trace(robot, cs, delassus)
    return prep_function(trace, name, operator), post_function(trace, name)
