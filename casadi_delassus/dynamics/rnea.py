"""rnea — inverse dynamics τ = M(q) v̇ + c(q, v) by the recursive Newton-Euler algorithm, O(n).

Featherstone, Rigid Body Dynamics Algorithms (2008), Table 5.1, in the notation of the PV paper
../shared/papers/004_52dd6d88d839fc14.txt (eqs. (10), (11), (23); gravity as the world's
acceleration a_0 = −a_grav, Sec. III-B2):

  forward, roots first:   v_i = ^iX_λ v_λ + S_i q̇_i,   a_b,i = v_i × S_i q̇_i,
                          a'_i = ^iX_λ a'_λ + S_i v̇_i + a_b,i,
                          f_i = H_i a'_i + v_i ×* H_i v_i  (about the centre of mass, ds.body_force)
  backward, leaves first: τ_i = S_iᵀ f_i,   f_λ(i) += ^iX_λᵀ f_i

The velocity sweep is dynamics_sweeps.Tree.velocities (shared with the forward solvers).
"""
from __future__ import annotations

from ..symbolic.scalar import cross_num, mat_vec, vadd
from ..sweeps import tree as ds
from ..symbolic.frames import transform_force, transform_motion


def inverse_dynamics(tree, v, a):
    """τ as a list (nv) for joint accelerations ``a`` (SX vector, Pinocchio layout)."""
    vel, c, _ = tree.velocities(v)
    g = tree.gravity([])
    acc, f = [None] * tree.n, [None] * tree.n
    for i in range(tree.n):
        par = tree.parent[i]
        ai = tree.vslice(a, i)
        if tree.is_free(i):
            acc[i] = tree.base_accel(i, ai, g[i])
        else:
            y = ds.root_accel(tree, i, g) if par < 0 else transform_motion(tree.T[i], acc[par])
            acc[i] = vadd(vadd(y, c[i]), tree.s_times(i, ai[0]) if tree.axis[i][0] is not None
                             else mat_vec(tree.S[i], ai))
        f[i] = ds.body_force(tree.robot.bodies[i], tree.T[i].o, vel[i], acc[i])    # H a + v ×* H v
    tau = [None] * tree.n
    for i in reversed(range(tree.n)):
        par = tree.parent[i]
        if tree.is_free(i):
            n, fl = f[i][:3], f[i][3:]                       # [n'; f] about the slid origin
            tau[i] = list(fl) + vadd(n, cross_num(tree.T[i].o, fl))
        else:
            tau[i] = [tree.sq(i, f[i])]
        if par >= 0:
            f[par] = vadd(f[par], transform_force(tree.T[i], f[i]))
    return tau


def rnea(robot, constraints, q, K_bodies, v, a):
    tree = ds.Tree(robot, constraints, q)
    return {"tau": ds.outputs_vdot(tree, inverse_dynamics(tree, v, a))}
