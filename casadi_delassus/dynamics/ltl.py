"""ltl — constrained dynamics in joint space with Featherstone's sparse LᵀDL factorization of
the joint-space inertia matrix and the Delassus Schur complement, O(nd² + md² + m²d + m³).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. II-C, eqs. (4)-(8) (the "LTL" column of
Table II); Featherstone, "Efficient factorization of the joint-space inertia matrix for branched
kinematic trees" (IJRR 2005) for M = Lᵀ D L without fill-in, and "Exploiting sparsity in
operational-space dynamics" (IJRR 2010) for Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ.  With dofs numbered
parents first and λ(k) the parent dof of k (a free joint is a chain of its six dofs):

  c = C(q, v) v + g(q)     RNEA with v̇ = 0 (gravity as a_0 = −a_grav); its forward pass gives
                            the bias accelerations a'_i, hence J̇ v − k = K_i a'_i + l_i
  M                         CRBA: composite inertias I^c_i, M_ji = S_jᵀ ^iX_jᵀ I^c_i S_i
  J                         rows K_i carried up the path of link i (K_i ^iX_j S_j)
  M = Lᵀ D L                leaves first, L_ki only for i ∈ anc(k) (no fill-in)
  y = L⁻ᵀ (τ − c),  z = D⁻¹ y                       (so M⁻¹ (τ − c) = L⁻¹ z)
  Y = J L⁻¹ (rows keep J's pattern),  Λ⁻¹ = Y D⁻¹ Yᵀ
  λ = Λ (k − J̇ v − Y z),  v̇ = L⁻¹ (z + D⁻¹ Yᵀ λ)      (M v̇ + c = τ + Jᵀ λ)

The Delassus system Λ⁻¹ λ = r is solved with its floating-base structure (``delassus_solve``):
Λ⁻¹ = A + Y_B D_B⁻¹ Y_Bᵀ, the base's six dofs B giving a rank-6 term and A block-diagonal over
the base's branches, by the block elimination pv.py uses at the base (linalg.saddle_solve:
the joint-space image of PV eq. (47)), whose pivots are positive wherever Λ⁻¹ is; without a
floating base by a dense LDLᵀ of Λ⁻¹.  The matrix inversion lemma (PV paper eqs. (53)-(55))
inverts each block of A and returns NaN at a stretched knee under a welded foot (q = 0 on
talos or go1); a dense LDLᵀ of Λ⁻¹ costs more (README "Design choices, measured").  The rows of
each K_i are orthonormalized first (Tree.orthonormalize: an ill-conditioned runtime K_i does
not square into cond(Λ⁻¹)).  Everything in local link frames (sweeps/tree.py); the free base's
dofs are carried in its slid frame and converted once on τ_b and v̇_b.  Redundant constraints
make Λ⁻¹ singular: ConstraintError at trace time (tree.check_regular).
"""
from __future__ import annotations

from ..symbolic.scalar import add, column, dot, is_zero, mul, sub
from ..sweeps.dynamics_derivatives import hard_derivative
from ..sweeps.tree import Tree, check_regular, newton_euler
from ..symbolic.probe import Probe
from ..symbolic import passes
from ..symbolic import linalg
from ..sweeps import joint_space


# -- the solver ------------------------------------------------------------------------------------
def delassus_solve(tree, Y, YD, D, Dinv, rhs):
    """λ = (Y D⁻¹ Yᵀ)⁻¹ rhs and the pivots of the solve.  With a free base, Λ⁻¹ = A + Y_B D_B⁻¹ Y_Bᵀ
    where the base's six dofs B give a rank-6 term and A = Σ_{d∉B} Y_d D_d⁻¹ Y_dᵀ is
    block-diagonal over the base's branches (rows of different branches share only base dofs):
    the joint-space image of PV eq. (47), solved by the same block elimination as pv.py's base
    (linalg.saddle_solve with the base inertia D_B, diagonal, and rows Y_B), whose pivots
    are positive wherever Λ⁻¹ is, unlike the matrix inversion lemma (PV paper eqs. (53)-(55)),
    which inverts each block of A (singular at a stretched knee).  Without a free base (A = Λ⁻¹)
    Λ⁻¹ is factorized densely, block by block.  Returns (λ, {base dof d: a_d}, pivots) with
    D_d⁻¹ (Yᵀ λ)_d = −a_d: v̇'s base part is taken from a, as pv.py rolls out from a_b."""
    robot = tree.robot
    m = len(Y)
    B = [d for i in range(tree.n) if tree.is_free(i)
         for d in range(robot.bodies[i].v_index, robot.bodies[i].v_index + 6)]
    N = [d for d in range(robot.nv) if d not in B]
    rows = list(range(m))
    if len(B) == 6:
        A = {}
        for a in range(m):
            for b in range(a, m):
                e = dot([YD[a][d] for d in N], [Y[b][d] for d in N])
                if not is_zero(e):
                    A[(a, b)] = e
        passes.done("Y = J L⁻¹, A = Σ_{d∉B} Y_d D_d⁻¹ Y_dᵀ (block-diagonal), right-hand side", A, rhs)
        a, lam, pivots = linalg.saddle_solve(({}, [D[d] for d in B], [Dinv[d] for d in B]),
                                         {r: [Y[r][d] for d in B] for r in rows}, A,
                                         sorted(linalg.blocks_of(A, rows), key=len), [0.0] * 6, dict(zip(rows, rhs)))
        return [lam[r] for r in rows], dict(zip(B, a)), pivots
    Lam = {(a, b): dot(YD[a], Y[b]) for a in range(m) for b in range(a, m)}
    passes.done("Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ, right-hand side", Lam, rhs)
    lam, pivots = [None] * m, []
    for blk in linalg.blocks_of(Lam, rows):
        fac = linalg.ldl(linalg.local(Lam, blk), len(blk))
        pivots += fac[1]
        for r, x in zip(blk, linalg.ldl_solve(fac, [rhs[r] for r in blk])):
            lam[r] = x
    return lam, {}, pivots


def ltl(robot, constraints, q, K_bodies, v, tau, k):
    tree = Tree(robot, constraints, q, K_bodies)
    tree.orthonormalize()
    v, tau = tree.local_inputs(v, tau)
    vel, c, _ = tree.velocities(v)
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    passes.done("first forward sweep: v_i, a_b,i", vel, c)
    own = tree.targets(k, g)
    f, acc = newton_euler(tree, vel, c, g)                    # v̇ = 0: c(q, v) and the bias accelerations a'_i
    C = [e for i in range(tree.n) for e in tree.joint_force(i, f[i])]
    passes.done("RNEA (v̇ = 0): c(q, v), a'_i", C)
    M = joint_space.mass_matrix(robot, tree.T)
    passes.done("CRBA: M", M)
    J = joint_space.constraint_jacobian(robot, constraints, tree.T, tree.rows())
    passes.done("constraint Jacobian J", J)
    parents, ops = joint_space.dof_parents(robot), linalg.Shared()
    L, D, Dinv = joint_space.ltdl(M, parents, ops)
    passes.done("M = Lᵀ D L (sparse)", L, Dinv)
    n, m = robot.nv, constraints.m
    tau_s = tree.to_slid(tau)
    y = joint_space.solve_lt(L, parents, [sub(tau_s[d], C[d]) for d in range(n)], ops)
    z = [mul(a, b) for a, b in zip(y, Dinv)]
    Y = [joint_space.solve_lt(L, parents, [0.0 if J[r, d].is_zero() else J[r, d] for d in range(n)], ops)
         for r in range(m)]
    rhs = [None] * m                                    # k − J̇ v − J M⁻¹ (τ − c)
    for i in range(tree.n):
        for rows, K, lv in own[i]:
            for r, gr in enumerate(rows):
                drift = add(dot([K[r, c_] for c_ in range(6)], acc[i]), lv[r])   # J̇v − k
                rhs[gr] = sub(sub(0.0, drift), dot(Y[gr], z))
    YD = [[mul(e, d) for e, d in zip(row, Dinv)] for row in Y]
    lam, a_B, pivots = delassus_solve(tree, Y, YD, D, Dinv, rhs)
    check_regular(Probe(robot, q, K_bodies), pivots, "ltl", constraints)
    passes.done("λ: Λ⁻¹ λ = k − J̇ v − J M⁻¹ (τ − c)", lam)
    w = [sub(z[d], a_B[d]) if d in a_B else add(z[d], dot([YD[r][d] for r in range(m)], lam))
         for d in range(n)]
    vdot = tree.from_slid(joint_space.solve_l(L, parents, w, ops))
    passes.done("v̇ = L⁻¹ (z + D⁻¹ Yᵀ λ)", vdot)
    return {"vdot": column(tree.user_vdot(vdot, v)), "lam": column(tree.multipliers(lam))}


derivative = hard_derivative("ltl", ltl)
