"""ltl_soft — the soft Gauss principle in joint space (MuJoCo's formulation) with Featherstone's
sparse LᵀDL factorization, O(nd² + md²).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. VI (eq. 50) and Sec. IX-C ("LTL-s": "the
LTL solver is also used in MuJoCo which uses a joint-space version of the soft-Gauss
principle"), Table II.  Same problem and outputs as pv_soft.py:

    (M + Jᵀ R⁻¹ J) v̇ = τ − c − Jᵀ R⁻¹ (J̇ v − k),      λ = −R⁻¹ (J v̇ + J̇ v − k).

Jᵀ R⁻¹ J = Σ_i J_iᵀ K_iᵀ R_i⁻¹ K_i J_i couples only dofs on one root-to-link path, so
M + Jᵀ R⁻¹ J keeps the branch-induced sparsity of M and factorizes without fill-in:

  RNEA (v̇ = 0) with the forces K_iᵀ R_i⁻¹ (K_i a'_i + l_i) added on the constrained links:
        its backward pass gives c + Jᵀ R⁻¹ (J̇ v − k) directly (J is never formed)
  CRBA with the link inertias H_i + K_iᵀ R_i⁻¹ K_i (PV eq. 52): M + Jᵀ R⁻¹ J directly
  M̃ = Lᵀ D L (ltl.ltdl),  v̇ = L⁻¹ D⁻¹ L⁻ᵀ (τ − c̃)
  λ_i = −R_i⁻¹ (K_i a'_i + l_i) = R_i⁻¹ (k'_i − K_i a'_i) with a'_i the constrained links' accelerations (one forward
        pass along their paths).
"""
from __future__ import annotations

from ..symbolic import linalg
from ..symbolic.frames import transform_motion
from ..symbolic.scalar import column, dot, mat_vec, mul, sub, vadd, vsub
from ..sweeps import joint_space
from ..sweeps.dynamics_derivatives import soft_derivative
from ..sweeps.tree import Tree, newton_euler, root_accel, soft_terms
from ..symbolic import passes


def ltl_soft(robot, constraints, q, K_bodies, v, tau, k, R):
    tree = Tree(robot, constraints, q, K_bodies)
    v, tau = tree.local_inputs(v, tau)
    vel, c, _ = tree.velocities(v)
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    passes.done("first forward sweep: v_i, a_b,i", vel, c)
    own = tree.targets(k, g, negate=True)                # k'_i = k_i − K_i a_grav,i = −l_i
    inertia, _, rinv = soft_terms(tree, R, k)

    def soft_forces(acc):                      # K_iᵀ R_i⁻¹ (K_i a'_i + l_i) = Jᵀ R⁻¹ (J̇ v − k)
        out = {}
        for i in range(tree.n):
            for rows, K, lv in own[i]:
                f = out.get(i, [0.0] * 6)
                for r, gr in enumerate(rows):
                    row = [K[r, c_] for c_ in range(6)]
                    e = mul(rinv[gr], sub(dot(row, acc[i]), lv[r]))
                    f = vadd(f, [mul(x, e) for x in row])
                out[i] = f
        return out

    f, _ = newton_euler(tree, vel, c, g, extra_force=soft_forces)
    C = [e for i in range(tree.n) for e in tree.joint_force(i, f[i])]
    passes.done("RNEA (v̇ = 0) with soft constraint forces: c + Jᵀ R⁻¹ (J̇ v − k)", C)
    M = joint_space.mass_matrix(robot, tree.T, inertia)
    passes.done("CRBA with H_i + K_iᵀ R_i⁻¹ K_i: M + Jᵀ R⁻¹ J", M)
    parents, ops = joint_space.dof_parents(robot), linalg.Shared()
    L, _, Dinv = joint_space.ltdl(M, parents, ops)
    passes.done("M̃ = Lᵀ D L (sparse)", L, Dinv)
    tau_s = tree.to_slid(tau)
    y = joint_space.solve_lt(L, parents, [sub(tau_s[d], C[d]) for d in range(robot.nv)], ops)
    vs = joint_space.solve_l(L, parents, [mul(a, b) for a, b in zip(y, Dinv)], ops)
    passes.done("v̇ = L⁻¹ D⁻¹ L⁻ᵀ (τ − c̃)", vs)
    # accelerations of the constrained links (true ones shifted by −a_grav): a'_i = ^iX a'_λ + a_b,i + S_i v̇_i
    acc = [None] * tree.n
    lam = [0.0] * constraints.m
    for i in range(tree.n):
        if not tree.supports[i]:
            continue
        bi, par = robot.bodies[i], tree.parent[i]
        vi = vs[bi.v_index:bi.v_index + bi.joint.nv]
        if tree.is_free(i):
            acc[i] = vsub(vi[3:] + vi[:3], [0.0] * 3 + g[i])        # slid dofs [a_lin; α]
        else:
            y_ = root_accel(tree, i, g) if par < 0 else transform_motion(tree.T[i], acc[par])
            acc[i] = vadd(vadd(y_, c[i]), tree.s_times(i, vi[0]) if tree.axis[i][0] is not None
                             else mat_vec(tree.S[i], vi))
        for rows, K, nl in own[i]:
            for r, gr in enumerate(rows):                              # λ = R⁻¹ (k' − K a')
                lam[gr] = mul(rinv[gr], sub(nl[r], dot([K[r, c_] for c_ in range(6)], acc[i])))
    passes.done("λ = −R⁻¹ (K_i a'_i + l_i) along the constrained paths", lam)
    return {"vdot": column(tree.user_vdot(tree.from_slid(vs), v)), "lam": column(lam)}


derivative = soft_derivative("ltl_soft", ltl_soft)
