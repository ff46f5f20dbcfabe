"""The contact step's mathematics: for one robot and one set of point contacts, the SX of the C function

    <name>_step(q, v, tau, dt, mu[], normals, lambda_warm, opts, out v_next, out lambda, out sigma, out info)

that takes one velocity-level time step with frictional contact (Pinocchio 4's convention;
Carpentier et al. 2024, RSS): v_free = v + dt·ABA(q, v, τ), G = J M⁻¹ Jᵀ, g = J v_free, the
ADMM or PGS solve of contact/admm.py or contact/pgs.py for λ (an impulse, N·s) and
σ = Gλ + g, then v_next = v_free + M⁻¹ Jᵀ λ.  The per-robot parts are SX (``<name>_prep``: v_free, G by a
Delassus algorithm, g, and the stored q-only part of ``<name>_post``: M⁻¹ Jᵀ λ by ABA with neither velocity nor
gravity, PV paper ../shared/papers/004_52dd6d88d839fc14.txt Sec. IV; ``<name>_factor`` and
``<name>_solve``: the damped inverse (G + ρI)⁻¹ by LDLᵀ, or matrix-free).  Which Delassus algorithm and which
linear solve, the C around these parts and the build are the compile side's (codegen/contact_step.py, the
iteration loop in codegen/templates/contact_step.c.j2); loading and calling it the runtime's
(runtime/contact_step.py); ``cd.contact_step`` the entry (stepping/contact.py).

Contacts are point candidates ``LINK[@x,y,z]`` (contact/candidates.py; the constraint
``LINK:3d-world[@x,y,z]``: rows along world x,
y, z = [t₁, t₂, n] for the ground plane z = 0); a unit normal per contact given at run time
turns each contact's rows into the frame [t₁, t₂, n] of ``contact_frames``."""
from __future__ import annotations

import collections
import copy

import casadi as ca
import numpy as np

from ..constraints import ConstraintSet
from ..dynamics.aba import aba
from ..errors import ConstraintError
from ..operators.damped_inverse_apply import apply as damped_inverse_apply
from ..symbolic import linalg
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


def step_functions(robot, cs, name, delassus, damped_first=None):
    """(prep, post): the per-robot casadi.Functions of the step, G by ``delassus`` (a Delassus algorithm's function
    (robot, cs, q, K_bodies) → {"delassus": G}: the registry's, codegen/contact_step.py picks it).  M⁻¹Jᵀλ is
    staged (symbolic/staging.py): what it needs of q alone (transforms, articulated inertias) is
    computed in prep, where cse shares it with ABA and the Delassus algorithm, and handed to
    post as the vector ``w``.  ``damped_first``: the matrix-free damped inverse's q stage
    (matrix_free_functions), whose ``w_q`` prep then computes too (output ``wd``)."""
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
    extra = [damped_first(q)] if damped_first is not None else []
    prep = ca.Function(f"{name}_prep", [q, v, tau, dt],
                       ca.cse([ca.densify(v_free), ca.densify(G), ca.densify(J @ v_free), first.function(q), *extra]),
                       ["q", "v", "tau", "dt"], ["v_free", "G", "g", "w", *(["wd"] if extra else [])])
    post = ca.Function(f"{name}_post", last.function.sx_in(), ca.cse(last.function.call(last.function.sx_in())),
                       ["lam", "w"], ["dv"])
    return prep, post


def matrix_free_functions(robot, cs, name):
    """(q stage, factor, solve): the damped inverse (G + d I)⁻¹ b = (R⁻¹ + J M⁻¹ Jᵀ)⁻¹ b with the stiffness
    R = 1/d on every row, by ``damped_inverse_apply`` (operators/, matrix-free paper
    ../shared/papers/001_a194bdf892a0cc2c.txt, Sec. V: matrix inversion lemma + loop-constrained ABA, O(n + m))
    staged as its Sec. VI-B re-evaluates it (symbolic/staging.py): what q alone gives (its ``w_q``, computed in
    prep), ``<name>_factor(R, w_q)`` when ρ changes, ``<name>_solve(b, w_R)`` at every iteration."""
    q, R, b = ca.SX.sym("q", robot.nq), ca.SX.sym("R", cs.m), ca.SX.sym("lam", cs.m)
    x = damped_inverse_apply(robot, cs, q, cs.symbolic_K_bodies(q, {}), R=R, lam=b)
    f = ca.Function("damped", [q, R, b], [ca.densify(x["damped_inverse_apply"])], ["q", "R", "lam"], ["x"])
    first, damping, apply = split(f, [("q", ["q"]), ("R", ["R"]), ("lam", ["lam"])])
    factor = ca.Function(f"{name}_factor", damping.function.sx_in(), ca.cse(damping.function.call(damping.function.sx_in())),
                         damping.function.name_in(), ["factors"])
    solve = ca.Function(f"{name}_solve", apply.function.sx_in(), ca.cse(apply.function.call(apply.function.sx_in())),
                        apply.function.name_in(), ["x"])
    return first.function, factor, solve


def without_damped(prep):
    """prep without the matrix-free damped inverse's q stage (its fifth output, ``wd``)."""
    outs = prep.call(prep.sx_in())[:4]
    return ca.Function(prep.name(), prep.sx_in(), outs, prep.name_in(), prep.name_out()[:4])


def damped_inverse_functions(m, name):
    """(factor, solve): ``<name>_factor(G, d)`` → the LDLᵀ factors of G + d I packed as one vector
    (L below the diagonal, row by row, then D⁻¹), by symbolic/linalg.py's ldl over a symbolic m×m
    G, and ``<name>_solve(factors, b)`` → (G + d I)⁻¹ b: ADMM's linear solve, straight-line code."""
    G, d = ca.SX.sym("G", m, m), ca.SX.sym("d")
    L, _, Dinv = linalg.ldl({(i, j): G[i, j] + d if i == j else G[i, j] for i in range(m) for j in range(i, m)}, m)
    keys = sorted(L)
    factor = ca.Function(f"{name}_factor", [G, d], [ca.vertcat(*[L[k] for k in keys], *Dinv)], ["G", "d"], ["factors"])
    fac, b = ca.SX.sym("factors", len(keys) + m), ca.SX.sym("b", m)
    x = linalg.ldl_solve(({k: fac[n] for n, k in enumerate(keys)}, None, [fac[len(keys) + i] for i in range(m)]),
                         [b[i] for i in range(m)])
    return factor, ca.Function(f"{name}_solve", [fac, b], [ca.vertcat(*x)], ["factors", "b"], ["x"])

