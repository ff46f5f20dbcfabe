"""Matrix-free Delassus operator: λ ↦ Λ⁻¹ λ = J M⁻¹ Jᵀ λ in O(n + m), never forming Λ⁻¹.

Matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Alg. 1 (Jᵀλ), Alg. 2 (M⁻¹τ by
the articulated-body algorithm without bias terms), Alg. 3 (J ν̇), merged into two sweeps as
its Sec. IV-D says:

  backward, leaves first (after the articulated inertias, articulated.py):
      f_i ← Σ_e K_eᵀ λ_e (constraints on body i)  +  Σ_children ^cX_iᵀ (f_c − Ū_c u_c)
      u_i = S_iᵀ f_i                                   (Alg. 1 line 8 merged into Alg. 2 line 3)
  forward, roots first:
      a'_i = ^iX_λ(i) a_λ(i),  ν̇_i = D_i⁻¹ (u_i − U_iᵀ a'_i),  a_i = a'_i + S_i ν̇_i
      (Λ⁻¹λ)_e = K_e a_i                              (Alg. 3 line 6 on the same a_i)

Only bodies whose subtree carries a constraint take part in the force and acceleration
sweeps (elsewhere f = 0 and a is not needed).  A free joint keeps D_b as LDLᵀ factors
(articulated.py) and is solved by substitution, never inverted.  Constraints act between one
body and the world (the K_i of constraints.py).

``sweeps`` is shared with damped_inverse_apply.py, which runs the same two sweeps over
modified articulated inertias.
"""
from __future__ import annotations

import casadi as ca

from ..errors import DelassusError
from ..spatial import sx
from . import linalg
from .articulated import articulated_inertias
from .frames import choose_offsets, local_transforms


def check_tree(robot):
    for i, b in enumerate(robot.bodies):
        if b.joint.kind == "free" and b.parent >= 0:
            raise DelassusError(f"body {b.name!r}: a free joint below another body is not supported "
                                f"by the matrix-free operators (free joints must be roots)")


def frames_for(robot, constraints, q):
    """Local transforms in frames slid along the joint axes (constrained bodies keep theirs)."""
    return local_transforms(robot, q, choose_offsets(robot, constraints))


def constraint_forces(robot, constraints, K_bodies, lam):
    """f_i = Σ K_eᵀ λ_e per body (6x1 SX, body coordinates [angular; linear]) or None."""
    f = [None] * robot.n_bodies
    for c, K, r0 in zip(constraints.constraints, K_bodies, constraints.offsets):
        fi = ca.mtimes(sx(K).T, lam[r0:r0 + c.rows])
        f[c.body] = fi if f[c.body] is None else f[c.body] + fi
    return f


def _ldl_solve(fac, b):
    """x with (L d Lᵀ) x = b for the free joint's 6x6 LDLᵀ factors (linalg.ldl)."""
    L, _, dinv = fac
    z = linalg.forward_substitute(L, 6, [[b[k]] for k in range(6)])
    y = [z[k][0] * dinv[k] for k in range(6)]
    x = [None] * 6
    for i in reversed(range(6)):
        x[i] = y[i] - linalg._dot((L.get((k, i), 0), x[k]) for k in range(i + 1, 6))
    return ca.vertcat(*x)


def sweeps(robot, T, abi, f):
    """The merged backward (forces) and forward (accelerations) sweeps of Alg. 2 with the
    constraint forces ``f`` as the initial link forces.  Returns the link accelerations
    a_i (6x1 SX) of the bodies whose subtree carries a force, None elsewhere."""
    check_tree(robot)
    n = robot.n_bodies
    f = list(f)
    u = [None] * n
    for i in reversed(range(n)):
        if f[i] is None:
            continue
        J = abi[i]
        if J.free:
            u[i] = ca.mtimes(sx(J.S).T, f[i])
            continue
        u[i] = J.sign * f[i][J.axis] if J.axis is not None else ca.dot(sx(J.S), f[i])
        p = robot.parent(i)
        if p >= 0:
            fl = f[i] - J.Ubar * u[i]                              # Sᵀ(f − Ū u) = 0
            if J.axis is not None:
                fl[J.axis] = 0
            fp = T[i].X.transpose_force(fl)
            f[p] = fp if f[p] is None else f[p] + fp
    a = [None] * n
    for i in range(n):
        if u[i] is None:
            continue
        J, p = abi[i], robot.parent(i)
        ap = T[i].X.apply_motion(a[p]) if p >= 0 else None        # a'_i (None: zero)
        if J.free:
            rhs = u[i] if ap is None else u[i] - ca.mtimes(J.U.T, ap)
            a[i] = ca.mtimes(sx(J.S), _ldl_solve(J.ldl, rhs))
            continue
        r = u[i] if ap is None else u[i] - ca.dot(J.U, ap)
        nu = J.Dinv * r
        if ap is None:
            ai = ca.mtimes(sx(J.S), nu)
        elif J.axis is not None:
            ai = ca.SX(ap)
            ai[J.axis] = ai[J.axis] + J.sign * nu
        else:
            ai = ap + ca.mtimes(sx(J.S), nu)
        a[i] = ai
    return a


def constraint_accelerations(constraints, K_bodies, a):
    """K_e a_i for every constraint, stacked in constraint order (m x 1)."""
    return ca.vertcat(*[ca.mtimes(sx(K), a[c.body]) for c, K in zip(constraints.constraints, K_bodies)])


def apply(robot, constraints, q, K_bodies, lam):
    T = frames_for(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    a = sweeps(robot, T, abi, constraint_forces(robot, constraints, K_bodies, lam))
    return {"delassus_apply": constraint_accelerations(constraints, K_bodies, a)}
