"""The two passes of the matrix-free Delassus operators (delassus_apply.py describes them:
matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Alg. 1-3 merged as its Sec. IV-D
says): constraint forces on the links, the backward force sweep and the forward acceleration
sweep over the articulated inertias, the constraint-space accelerations.  Over articulated
inertias with couplings between the bodies of link-to-link constraints (Alg. 4,
damped_inverse_apply.py), each eliminated joint also sends forces to, and reads accelerations
of, its neighbours."""
from __future__ import annotations

import casadi as ca

from ..errors import DelassusError
from ..symbolic import linalg
from ..symbolic.spatial import sx


def check_tree(robot):
    for i, b in enumerate(robot.bodies):
        if b.joint.kind == "free" and b.parent >= 0:
            raise DelassusError(f"body {b.name!r}: a free joint below another body is not supported "
                                f"by the matrix-free operators (free joints must be roots)")


def _add(x, y):
    """x + y where None stands for zero."""
    return y if x is None else x if y is None else x + y


def constraint_forces(robot, constraints, rows, lam):
    """Alg. 1 lines 2-6: f_i = Σ K_e^iᵀ λ_e per body (6x1 SX or None) for the constraints'
    link rows ``rows`` (joint_space.link_rows), and joint forces τ_i = 𝒦_iᵀ λ_i (n_i x 1 or None)."""
    f, tau = [None] * robot.n_bodies, [None] * robot.n_bodies
    for c, pairs, r0 in zip(constraints.constraints, rows, constraints.offsets):
        lam_c = lam[r0:r0 + c.rows]
        for i, K in pairs:
            f[i] = _add(f[i], ca.mtimes(sx(K).T, lam_c))
        if c.joint:
            tau[c.body] = _add(tau[c.body], ca.mtimes(sx(c.K_body()).T, lam_c))
    return f, tau


def _joint_force(art, f, tau):
    """u_i = S_iᵀ f_i + τ_i (either may be None)."""
    u = None
    if f is not None:
        u = ca.mtimes(sx(art.S).T, f) if art.axis is None else art.sign * f[art.axis]
    return _add(u, tau)


def inverse_inertia_sweeps(robot, T, abi, f, tau=None):
    """The merged backward (forces) and forward (accelerations) sweeps of Alg. 2 with the
    constraint forces ``f`` as the initial link forces and ``tau`` as joint forces.  Returns
    (a, ν̇): link accelerations a_i (6x1 SX) and joint accelerations ν̇_i (n_i x 1) of the
    bodies whose subtree carries a force, None elsewhere."""
    check_tree(robot)
    n = robot.n_bodies
    f, tau = list(f), list(tau or [None] * n)
    u = [None] * n
    for i in reversed(range(n)):
        if f[i] is None and tau[i] is None:
            continue
        art = abi[i]
        u[i] = _joint_force(art, f[i], tau[i])
        if art.couplings:                                            # Alg. 4 line 24
            y = ca.vertcat(*art.solve([u[i][k] for k in range(u[i].shape[0])]))
            for j, R in art.couplings.items():
                f[j] = _add(f[j], -ca.mtimes(R.T, y))
        p = robot.parent(i)
        if p >= 0 and not art.free:
            if art.multi:                                            # f − U D⁻¹ u
                Uy = ca.mtimes(art.U, ca.vertcat(*art.solve([u[i][k] for k in range(u[i].shape[0])])))
                fl = -Uy if f[i] is None else f[i] - Uy
                for c, l, sg in art.units:                           # Sᵀ(f − U D⁻¹ u) = −τ exactly
                    fl[l] = 0 if tau[i] is None else -sg * tau[i][c]
            else:
                fl = -art.Ubar * u[i] if f[i] is None else f[i] - art.Ubar * u[i]
                if art.axis is not None:                             # Sᵀ(f − Ū u) = −τ exactly
                    fl[art.axis] = 0 if tau[i] is None else -art.sign * tau[i]
            f[p] = _add(f[p], T[i].X.transpose_force(fl))
    a, nu = [None] * n, [None] * n
    for i in range(n):
        if u[i] is None:
            continue
        art, p = abi[i], robot.parent(i)
        ap = T[i].X.apply_motion(a[p]) if p >= 0 else None        # a'_i (None: zero)
        r = u[i] if ap is None else u[i] - ca.mtimes(art.U.T, ap)
        for j, R in art.couplings.items():                           # Alg. 4 line 36
            r = r - ca.mtimes(R, a[j])
        if art.multi:
            nu[i] = ca.vertcat(*linalg.ldl_solve(art.ldl, [r[k] for k in range(r.shape[0])]))
            a[i] = ca.mtimes(sx(art.S), nu[i]) if ap is None else ap + ca.mtimes(sx(art.S), nu[i])
            continue
        nu[i] = art.Dinv * r
        if ap is None:
            ai = ca.mtimes(sx(art.S), nu[i])
        elif art.axis is not None:
            ai = ca.SX(ap)
            ai[art.axis] = ai[art.axis] + art.sign * nu[i]
        else:
            ai = ap + ca.mtimes(sx(art.S), nu[i])
        a[i] = ai
    return a, nu


def constraint_accelerations(constraints, rows, a, nu):
    """Σ_i K_e^i a_i for every constraint (𝒦 ν̇ for a joint), stacked in constraint order (m x 1)."""
    out = []
    for c, pairs in zip(constraints.constraints, rows):
        acc = ca.mtimes(sx(c.K_body()), nu[c.body]) if c.joint else None
        for i, K in pairs:
            acc = _add(acc, ca.mtimes(sx(K), a[i]))
        out.append(acc)
    return ca.vertcat(*out)
