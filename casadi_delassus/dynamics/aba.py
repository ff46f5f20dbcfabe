"""aba — unconstrained forward dynamics v̇ = M⁻¹ (τ − c(q, v)) by Featherstone's
articulated-body algorithm, O(n).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. IV: "In the absence of end-effector
constraints, only eq. (20a) and eq. (20b) need to be computed ... identical to ... ABA" —
Alg. 1 without the K^A, l, L^A terms:

  first forward sweep (sweeps/tree.py, Tree.velocities, .bias_forces):  v_i, a_b,i, p_i
  backward sweep, leaves first:
      H_i^A, U_i, D_i (articulated.articulated_inertias: eq. 42a, Alg. 1 lines 7, 9)
      u_i = τ_i − S_iᵀ p_i^A,  p_λ(i)^A += ^iX_λᵀ (p_i^A + H_i^a a_b,i + Ū_i u_i)   (eq. 42b, line 8)
  floating base:   a'_b = −(H_b^A)⁻¹ p_b^A                                       (eq. 45, no λ)
  roll-out, roots first (lines 16-17):
      q̈_i = D_i⁻¹ (u_i − U_iᵀ (^iX_λ a'_λ + a_b,i)),  a'_i = ^iX_λ a'_λ + a_b,i + S_i q̈_i

with gravity as the world's acceleration a_0 = −a_grav (Sec. III-B2).  pv.py reduces to this
when there are no constraints.
"""
from __future__ import annotations

from ..symbolic.scalar import column, neg, vadd, vsub
from ..sweeps.tree import Tree, joint_backward, joint_backward_multi, joint_forward, joint_forward_multi, root_accel
from ..symbolic import passes
from ..symbolic.frames import transform_force, transform_motion
from ..sweeps.articulated import articulated_inertias
from ..sweeps.dynamics_derivatives import check_wrt, forward_dynamics_jacobians


def solve(tree, v, tau, extra_inertia=None, extra_force=None):
    """(per-body q̈ lists, per-body a'_i = a_i − a_grav,i, gravity g_i on the constrained paths).
    ``extra_inertia`` {i: symmetric SX} and ``extra_force(g)`` -> {i: 6-list added to p_i} (g:
    gravity on the constrained paths) modify the bodies' inertias and forces (PV-soft, eq. 52)."""
    vel, c, _ = tree.velocities(v)
    p = tree.bias_forces(vel)
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    if extra_force:
        ef = extra_force(g)
        p = [vadd(x, ef[i]) if i in ef else x for i, x in enumerate(p)]
    passes.done("first forward sweep: v_i, a_b,i, p_i", vel, c, p)
    abi = (articulated_inertias(tree.robot, tree.T) if not extra_inertia
           else articulated_inertias(tree.robot, tree.T, {i: [E] for i, E in extra_inertia.items()}))
    passes.done("backward: articulated inertias H^A, D", [art.HA for art in abi], [art.Dinv for art in abi if art.Dinv is not None])
    pA = [list(x) for x in p]
    u = [None] * tree.n
    for i in reversed(range(tree.n)):
        art = abi[i]
        if art.free:
            pA[i] = vsub(pA[i], tree.base_wrench(i, tree.vslice(tau, i), g[i]))
            continue
        if art.multi:
            u[i], pa = joint_backward_multi(art, pA[i], tree.vslice(tau, i), c[i])
        else:
            u[i], pa = joint_backward(tree, i, art, pA[i], tree.vslice(tau, i)[0], c[i])
        par = tree.parent[i]
        if par >= 0:
            pA[par] = vadd(pA[par], transform_force(tree.T[i], pa))
    passes.done("backward: forces p^A, u", pA, u)
    qdd, acc = [None] * tree.n, [None] * tree.n
    for i in range(tree.n):
        art, par = abi[i], tree.parent[i]
        if art.free:
            acc[i] = art.omega([neg(x) for x in pA[i]])
            qdd[i] = tree.base_qdd(i, acc[i], g[i])
            continue
        y = root_accel(tree, i, g) if par < 0 else transform_motion(tree.T[i], acc[par])
        if art.multi:
            qdd[i], acc[i] = joint_forward_multi(tree, i, art, y, c[i], u[i])
        else:
            q1, acc[i] = joint_forward(tree, i, art, y, c[i], u[i])
            qdd[i] = [q1]
    passes.done("roll-out: q̈_i, a_i", qdd)
    return qdd, acc, g


def aba(robot, constraints, q, K_bodies, v, tau):
    tree = Tree(robot, constraints, q)
    v, tau = tree.local_inputs(v, tau)
    qdd, _, _ = solve(tree, v, tau)
    return {"vdot": column(tree.user_vdot([x for qi in qdd for x in qi], v))}


def derivative(robot, constraints, q, K_bodies, wrt, v, tau):
    """∂v̇/∂(q, v, τ) (sweeps/dynamics_derivatives.py: −M⁻¹ ∂RNEA/∂x at a = v̇, and M⁻¹)."""
    wrt = check_wrt("aba", wrt, ("q", "v", "tau"))
    tree = Tree(robot, constraints, q)
    qdd, _, _ = solve(tree, v, tau)
    return forward_dynamics_jacobians(tree, v, [x for qi in qdd for x in qi], wrt)
