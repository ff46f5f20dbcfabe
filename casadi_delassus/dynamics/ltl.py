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
the base's branches, by the block elimination pv.py uses at the base (dynamics_sweeps.saddle_solve:
the joint-space image of PV eq. (47)), whose pivots are positive wherever Λ⁻¹ is; without a
floating base by a dense LDLᵀ of Λ⁻¹.  On the talos anchor: 36.1k instructions, against 34.7k for
the matrix inversion lemma (PV paper eqs. (53)-(55)) that was used before, which inverts each
block of A and returned NaN at a stretched knee under a welded foot (q = 0 on talos or go1),
and 40.3k for a dense LDLᵀ of Λ⁻¹.  The rows of each K_i are orthonormalized first
(Tree.orthonormalize: an ill-conditioned runtime K_i does not square into cond(Λ⁻¹)).
Everything in local link frames (dynamics_sweeps); the free base's dofs are carried in its slid
frame and converted once on τ_b and v̇_b.  Redundant constraints make Λ⁻¹ singular: ConstraintError
at trace time (pv.check_regular).
"""
from __future__ import annotations

import numpy as np

from ..symbolic.scalar import add, column, cross, dot, is_zero, mul, neg, sub, sym_vec, vadd, vsub
from ..sweeps import tree as ds
from ..symbolic import linalg
from ..sweeps.articulated import symmetric_sum
from .pv import check_regular
from ..symbolic.frames import transform_force, transform_inertia, transform_motion


# -- the dof tree ------------------------------------------------------------------------------
def dof_parents(tree):
    """λ(k) for every dof k (-1 at a root): a multi-dof joint is a chain of its dofs."""
    lam = []
    for b in tree.robot.bodies:
        p = tree.robot.bodies[b.parent] if b.parent >= 0 else None
        prev = p.v_index + p.joint.nv - 1 if p is not None else -1
        for t in range(b.joint.nv):
            lam.append(prev if t == 0 else b.v_index + t - 1)
    return lam


def ancestors(lam, k):
    out = []
    i = lam[k]
    while i >= 0:
        out.append(i)
        i = lam[i]
    return out


# -- joint-space quantities ---------------------------------------------------------------------
def pick(tree, i, f):
    """S_iᵀ f for a force (or row) 6-list in body-i coordinates: a list over i's dofs.  The free
    base's dofs are taken in its slid frame, [linear; angular] ([f; n]): the conversion to
    Pinocchio's base coordinates is done once on τ_b and v̇_b (``to_slid``, ``from_slid``)."""
    if tree.is_free(i):
        return list(f[3:]) + list(f[:3])
    return [tree.sq(i, f)]


def motion_columns(tree, i):
    """S_i as motion 6-lists (for the free base in the slid frame: [0; e_k] then [e_k; 0])."""
    if tree.is_free(i):
        return [[1.0 if j == 3 + k else 0.0 for j in range(6)] for k in range(3)] + \
            [[1.0 if j == k else 0.0 for j in range(6)] for k in range(3)]
    return [[float(tree.S[i][r, 0]) for r in range(6)]]


def to_slid(tree, tau):
    """τ with the free bases' entries as forces about the slid origins ([f; n − o × f])."""
    out = list(tau[d] for d in range(tree.robot.nv))
    for i in range(tree.n):
        if tree.is_free(i):
            v0 = tree.robot.bodies[i].v_index
            w = tree.base_wrench(i, out[v0:v0 + 6])                  # [n'; f]
            out[v0:v0 + 6] = w[3:] + w[:3]
    return out


def from_slid(tree, vdot):
    """v̇ with the free bases' entries back in Pinocchio's coordinates: a_lin − α × o."""
    out = list(vdot)
    for i in range(tree.n):
        if tree.is_free(i):
            v0 = tree.robot.bodies[i].v_index
            al, alpha = out[v0:v0 + 3], out[v0 + 3:v0 + 6]
            out[v0:v0 + 3] = vsub(al, cross(alpha, [float(x) for x in tree.T[i].o]))
    return out


def columns(tree, i, IC, extra=None):
    """I^c_i S_i as force 6-lists, one per dof of body i (I^c_i a ds.Rigid, plus an optional
    symmetric 6x6 SX ``extra``)."""
    cols = motion_columns(tree, i)
    out = []
    for col in cols:
        f = IC.times(col)
        if extra is not None:
            f = vadd(f, sym_vec(extra, col))
        out.append(f)
    return out


def crba(tree, extra=None):
    """M (upper entries {(row dof, col dof): SX}) by the composite-rigid-body algorithm
    (Featherstone, RBDA Table 6.2) with composite inertias kept as rigid bodies (ds.Rigid);
    ``extra`` {i: symmetric 6x6 SX} is added to the bodies' inertias (ltl_soft: Kᵀ R⁻¹ K) and
    carried up as a general symmetric part only along the paths that hold one."""
    IC = [ds.Rigid.of_body(b, t.o) for b, t in zip(tree.robot.bodies, tree.T)]
    EX = [None] * tree.n
    ex_terms = [[] for _ in range(tree.n)]
    for i in (extra or {}):
        ex_terms[i].append(extra[i])
    M = {}
    for i in reversed(range(tree.n)):
        if ex_terms[i]:
            EX[i] = symmetric_sum(np.zeros((6, 6)), ex_terms[i])
        par = tree.parent[i]
        if par >= 0:
            IC[par] = IC[par] + IC[i].to_parent(tree.T[i])
            if EX[i] is not None:
                ex_terms[par].append(transform_inertia(tree.T[i], EX[i]))
        F = columns(tree, i, IC[i], EX[i])
        bi = tree.robot.bodies[i]
        for c_, f in enumerate(F):                               # diagonal block
            col = bi.v_index + c_
            for r_, e in enumerate(pick(tree, i, f)):
                if bi.v_index + r_ <= col:
                    M[(bi.v_index + r_, col)] = e
        j = i
        while tree.parent[j] >= 0:
            F = [transform_force(tree.T[j], f) for f in F]
            j = tree.parent[j]
            bj = tree.robot.bodies[j]
            for c_, f in enumerate(F):
                for r_, e in enumerate(pick(tree, j, f)):
                    M[(bj.v_index + r_, bi.v_index + c_)] = e
    return M


def rnea_bias(tree, vel, c, g, extra_force=None):
    """(c(q, v) as a list over dofs, a'_i per body): RNEA with v̇ = 0 (gravity as a_0 = −a_grav),
    f_i = H_i a'_i + v_i ×* H_i v_i (ds.body_force); ``extra_force(acc)`` -> {i: 6-list} adds
    forces on bodies before the backward pass (ltl_soft)."""
    acc, f = [None] * tree.n, [None] * tree.n
    for i in range(tree.n):
        par = tree.parent[i]
        if tree.is_free(i):
            acc[i] = [0.0] * 3 + [neg(x) for x in g[i]]
        else:
            y = ds.root_accel(tree, i, g) if par < 0 else transform_motion(tree.T[i], acc[par])
            acc[i] = vadd(y, c[i])
        f[i] = ds.body_force(tree.robot.bodies[i], tree.T[i].o, vel[i], acc[i])
    if extra_force:
        for i, e in extra_force(acc).items():
            f[i] = vadd(f[i], e)
    C = [None] * tree.robot.nv
    for i in reversed(range(tree.n)):
        bi = tree.robot.bodies[i]
        for r_, e in enumerate(pick(tree, i, f[i])):
            C[bi.v_index + r_] = e
        par = tree.parent[i]
        if par >= 0:
            f[par] = vadd(f[par], transform_force(tree.T[i], f[i]))
    return C, acc


def jacobian(tree):
    """J as one dict {dof: SX} per constraint row (global order): the rows K_i carried up the
    path of link i as forces, picked by each S_j."""
    rows = [None] * tree.cs.m
    for i in range(tree.n):
        for grows, K in tree.own[i]:
            for r, gr in enumerate(grows):
                row, j, out = [K[r, c_] for c_ in range(6)], i, {}
                while True:
                    bj = tree.robot.bodies[j]
                    for d, e in enumerate(pick(tree, j, row)):
                        if not is_zero(e):
                            out[bj.v_index + d] = e
                    if tree.parent[j] < 0:
                        break
                    row = transform_force(tree.T[j], row)
                    j = tree.parent[j]
                rows[gr] = out
    return rows


# -- the sparse factorization and its solves -------------------------------------------------------
def ltdl(M, lam, D=None):
    """M = Lᵀ D L (Featherstone 2005, Table 2) for M given by upper entries {(i, k): e}, i ≤ k
    (i an ancestor of k, or i = k): (L as {(k, i): L_ki}, D⁻¹ list); ``D`` (a list) receives D."""
    n = len(lam)
    D = [None] * n if D is None else D
    H = {(k, i): e for (i, k), e in M.items()}                    # lower entries H[k, i], i ≤ k
    L, Dinv = {}, [None] * n
    for k in reversed(range(n)):
        Dinv[k] = 1 / H[(k, k)]
        D[k] = H[(k, k)]
        i = lam[k]
        while i >= 0:
            hki = H.get((k, i), 0.0)
            a = mul(hki, Dinv[k])
            j = i
            while j >= 0:
                H[(i, j)] = sub(H.get((i, j), 0.0), mul(a, H.get((k, j), 0.0)))
                j = lam[j]
            L[(k, i)] = a
            i = lam[i]
    return L, Dinv


def solve_lt(L, lam, b):
    """L⁻ᵀ b (leaves first)."""
    y = list(b)
    for k in reversed(range(len(lam))):
        if is_zero(y[k]):
            continue
        i = lam[k]
        while i >= 0:
            y[i] = sub(y[i], mul(L[(k, i)], y[k]))
            i = lam[i]
    return y


def solve_l(L, lam, z):
    """L⁻¹ z (roots first)."""
    x = [None] * len(lam)
    for k in range(len(lam)):
        acc = z[k]
        i = lam[k]
        while i >= 0:
            acc = sub(acc, mul(L[(k, i)], x[i]))
            i = lam[i]
        x[k] = acc
    return x


# -- the solver ------------------------------------------------------------------------------------
def sweeps(tree, v, tau, k, rec):
    """Shared by ltl and ltl_soft: the first forward sweep and gravity."""
    vel, c, _ = tree.velocities(v)
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    rec("first forward sweep: v_i, a_b,i", vel, c)
    return vel, c, g, tree.targets(k, g)


def delassus_solve(tree, Y, YD, D, Dinv, rhs, rec):
    """λ = (Y D⁻¹ Yᵀ)⁻¹ rhs and the pivots of the solve.  With a free base, Λ⁻¹ = A + Y_B D_B⁻¹ Y_Bᵀ
    where the base's six dofs B give a rank-6 term and A = Σ_{d∉B} Y_d D_d⁻¹ Y_dᵀ is
    block-diagonal over the base's branches (rows of different branches share only base dofs):
    the joint-space image of PV eq. (47), solved by the same block elimination as pv.py's base
    (dynamics_sweeps.saddle_solve with the base inertia D_B, diagonal, and rows Y_B), whose pivots
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
        rec("Y = J L⁻¹, A = Σ_{d∉B} Y_d D_d⁻¹ Y_dᵀ (block-diagonal), right-hand side", A, rhs)
        a, lam, pivots = ds.saddle_solve(({}, [D[d] for d in B], [Dinv[d] for d in B]),
                                         {r: [Y[r][d] for d in B] for r in rows}, A,
                                         sorted(ds.blocks_of(A, rows), key=len), [0.0] * 6, dict(zip(rows, rhs)))
        return [lam[r] for r in rows], dict(zip(B, a)), pivots
    Lam = {(a, b): dot(YD[a], Y[b]) for a in range(m) for b in range(a, m)}
    rec("Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ, right-hand side", Lam, rhs)
    lam, pivots = [None] * m, []
    for blk in ds.blocks_of(Lam, rows):
        fac = linalg.ldl(ds.local(Lam, blk), len(blk))
        pivots += fac[1]
        for r, x in zip(blk, ds.ldl_solve(fac, [rhs[r] for r in blk])):
            lam[r] = x
    return lam, {}, pivots


def ltl(robot, constraints, q, K_bodies, v, tau, k, rec=None):
    rec = rec or (lambda *a: None)
    tree = ds.Tree(robot, constraints, q, K_bodies)
    tree.orthonormalize()
    vel, c, g, own = sweeps(tree, v, tau, k, rec)
    C, acc = rnea_bias(tree, vel, c, g)
    rec("RNEA (v̇ = 0): c(q, v), a'_i", C)
    M = crba(tree)
    rec("CRBA: M", M)
    Jrows = jacobian(tree)
    rec("constraint Jacobian J", Jrows)
    lam_ = dof_parents(tree)
    D = [None] * robot.nv
    L, Dinv = ltdl(M, lam_, D)
    rec("M = Lᵀ D L (sparse)", L, Dinv)
    n, m = robot.nv, constraints.m
    tau_s = to_slid(tree, tau)
    y = solve_lt(L, lam_, [sub(tau_s[d], C[d]) for d in range(n)])
    z = [mul(a, b) for a, b in zip(y, Dinv)]
    Y = [solve_lt(L, lam_, [row.get(d, 0.0) for d in range(n)]) for row in Jrows]
    rhs = [None] * m                                    # k − J̇ v − J M⁻¹ (τ − c)
    for i in range(tree.n):
        for rows, K, lv in own[i]:
            for r, gr in enumerate(rows):
                drift = add(dot([K[r, c_] for c_ in range(6)], acc[i]), lv[r])   # J̇v − k
                rhs[gr] = sub(sub(0.0, drift), dot(Y[gr], z))
    YD = [[mul(e, d) for e, d in zip(row, Dinv)] for row in Y]
    lam, a_B, pivots = delassus_solve(tree, Y, YD, D, Dinv, rhs, rec)
    check_regular(ds.Probe(robot, q, K_bodies), pivots, "ltl", constraints)
    rec("λ: Λ⁻¹ λ = k − J̇ v − J M⁻¹ (τ − c)", lam)
    w = [sub(z[d], a_B[d]) if d in a_B else add(z[d], dot([YD[r][d] for r in range(m)], lam))
         for d in range(n)]
    vdot = from_slid(tree, solve_l(L, lam_, w))
    rec("v̇ = L⁻¹ (z + D⁻¹ Yᵀ λ)", vdot)
    return {"vdot": column(vdot), "lam": column(tree.multipliers(lam))}
