"""pv — the Popov-Vereshchagin constrained dynamics solver for floating-base trees with
constraints on any link, O(n + m²d + m³).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Alg. 1 (Sec. V-C), eqs. (41)-(49).  The
problem (eq. 36) is Gauss' principle with the motion constraints K_i a_i = k_i; in joint space
M v̇ + c = τ + Jᵀ λ, J v̇ + J̇ v = k (reference.constrained_dynamics; the output ``lam`` is
Pinocchio's λ, the paper's multipliers are −lam).  Three sweeps, in local link frames:

first forward sweep (dynamics_sweeps.Tree): ^iX_λ(i), v_i, a_b,i, p_i = −f_i   (lines 1-5)
    own rows: K_i^A ← K_i,  l_i ← K_i a_grav,i − k_i  (l_i = −k_i with gravity, Sec. III-B2)
backward sweep, leaves first:                                                   (lines 6-12)
    D_i, U_i, H_i^a = P_i H_i^A            (articulated.articulated_inertias, lines 7, 9)
    u_i = τ_i − S_iᵀ p_i^A,  p_λ^A += ^iX_λᵀ (p_i^A + H_i^a a_b,i + Ū_i u_i)        (line 8)
    k_i = K_i^A S_i
    K_λ^A ← [K_λ^A; K_i^A P_iᵀ ^iX_λ]                                            (line 10)
    L^A   ← L^A + k_i D_i⁻¹ k_iᵀ  (rows keep their global index: blkdiag by construction, line 11)
l_b (line 12, eq. 42d) by its closed form, eq. (30): l_b = l_n + K_n a⁰_n for the rows of each
    constrained link n, with a⁰ the roll-out for λ = 0 and a_b = 0 (a_0 = −a_grav at fixed
    roots): one 6-vector per joint of the constrained paths instead of m_i rows per joint.
free base b:  eq. (49) when L_b^A is invertible block by block (one block per branch of
    the base), eq. (47) otherwise (rows on the base itself, a branch with fewer joints than
    rows, ...); the choice is made at trace time from L_b^A at a seeded random configuration.
    (49): a_b = −(H_b^A + K_bᵀ L_b⁻¹ K_b)⁻¹ (p_b^A + K_bᵀ L_b⁻¹ l_b),  λ = L_b⁻¹ (K_b a_b + l_b)
    (47): λ = (L_b + K_b H_b⁻¹ K_bᵀ)⁻¹ (l_b − K_b H_b⁻¹ p_b^A),       a_b = −H_b⁻¹ (p_b^A + K_bᵀ λ)
fixed roots (the world): λ = (L_0^A)⁻¹ (l_0 + K_0^A a_0) (eq. 43), a_0 = −a_grav.
roll-out, roots first:                                                           (lines 15-17)
    q̈_i = D_i⁻¹ (u_i − U_iᵀ (^iX_λ a_λ + a_b,i) − k_iᵀ λ_i^A),  a_i = ^iX_λ a_λ + a_b,i + S_i q̈_i

Every reciprocal is taken once (D_i⁻¹, the pivots of the LDLᵀ factors); H_b⁻¹ and L⁻¹ are
never formed.  Without constraints this is exactly aba.py.

Limits (the generated code cannot raise):
- Redundant constraints make L^A singular: non-finite or meaningless output;
  reference.constrained_dynamics (and check.py) detects that case and says so.
- Eq. (49) needs every branch block of L_b^A invertible at run time.  The trace-time test is
  generic; at a configuration where one branch alone cannot produce its rows — a stretched
  knee under a welded foot, e.g. q = 0 on talos or go1 — the block is singular although the
  whole problem is not, and eq. (49) divides by zero (non-finite v̇, λ); near such a
  configuration it loses digits (relative error up to ~1e-8 measured on go1).  Eq. (47) (the
  dense m x m LDLᵀ) has no such limit but costs about 2x the base solve on Talos.
"""
from __future__ import annotations

import numpy as np

from . import dynamics_sweeps as ds
from . import linalg
from .articulated import articulated_inertias


def propagate(tree, i, J, K, l, u_i, c_i, with_l=True):
    """Lines 10-12 at a 1-DoF joint for rows K (list of 6-lists): (k̃, K P_iᵀ in body
    coordinates, shifted l) with k_i = K S_i = sign · k̃ (the sign is folded where k_i is used)."""
    a, s, g = ds.axis_g(tree, i, J)
    kt = [row[a] for row in K] if a is not None else [tree.sq(i, row) for row in K]
    nu = ds.mul(J.Dinv, u_i)
    pm = ds.add if s > 0 else ds.sub
    Kp = [[0.0 if col == a else ds.sub(row[col], ds.mul(kr, g[col])) for col in range(6)]
          for row, kr in zip(K, kt)]                  # K Pᵀ, column a exactly zero
    # l + K^A (a_b + S D⁻¹ (u − Uᵀ a_b)) = l + K Pᵀ a_b + k D⁻¹ u   (eq. 42d)
    lp = [pm(ds.add(lr, ds.dot(row, c_i)), ds.mul(kr, nu)) for row, lr, kr in zip(Kp, l, kt)] if with_l else None
    return kt, Kp, lp


def solve_dense(upper, n, rhs):
    """A⁻¹ rhs for symmetric A given by upper entries, by LDLᵀ (one reciprocal per pivot)."""
    return ds.ldl_solve(linalg.ldl(upper, n), rhs)


def blocks_of(upper, rows):
    """Connected components of the pattern of L (upper entries keyed by global rows)."""
    parent = {r: r for r in rows}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for (a, b), e in upper.items():
        if a in parent and b in parent and not ds.is0(e):
            parent[find(a)] = find(b)
    comps = {}
    for r in rows:
        comps.setdefault(find(r), []).append(r)
    return list(comps.values())


def invertible(probe, upper, block, rcond=1e-9):
    """Whether the block of L is (generically) invertible, from its value at the probe."""
    n = len(block)
    idx = {r: j for j, r in enumerate(block)}
    keys = [(a, b) for (a, b) in upper if a in idx and b in idx]
    vals = probe([upper[k] for k in keys]) if keys else []
    A = np.zeros((n, n))
    for (a, b), x in zip(keys, vals):
        A[idx[a], idx[b]] = A[idx[b], idx[a]] = x
    ev = np.linalg.eigvalsh(A)
    return ev.max() > 0 and ev.min() > rcond * ev.max()


def local(upper, block):
    idx = {r: j for j, r in enumerate(block)}
    return {(min(idx[a], idx[b]), max(idx[a], idx[b])): e for (a, b), e in upper.items()
            if a in idx and b in idx}


def solve_49(L, blocks, rows, K, l, A0, p):
    """The saddle point of ½ aᵀ A0 a + pᵀ a − ½ λᵀ L λ + λᵀ (K a + l) with L block-diagonal
    (``blocks`` of global rows, each invertible): eq. (49) and (46),

        a = −(A0 + Kᵀ L⁻¹ K)⁻¹ (p + Kᵀ L⁻¹ l),    λ = L⁻¹ (K a + l),

    block by block with Z_j = L_j⁻¹ [K_j | l_j] (unit-lower L_j, pivots d_j): only the small
    blocks and one 6x6 system are factorized.  A0 as upper entries {(x, y)}, p a 6-list.
    Returns (a, {row: λ_row})."""
    pos = {r: j for j, r in enumerate(rows)}
    A = dict(A0)
    rhs = list(p)
    facs = []
    for blk in blocks:
        fac = linalg.ldl(local(L, blk), len(blk))
        Lf, _, dinv = fac
        B = [list(K[pos[r]]) + [l[pos[r]]] for r in blk]
        Z = linalg.forward_substitute(Lf, len(blk), B)
        for j in range(len(blk)):
            zs = [ds.mul(x, dinv[j]) for x in Z[j]]
            for x in range(6):
                rhs[x] = ds.add(rhs[x], ds.mul(zs[x], Z[j][6]))
                for y in range(x, 6):
                    A[(x, y)] = ds.add(A.get((x, y), 0.0), ds.mul(zs[x], Z[j][y]))
        facs.append((blk, fac, Z))
    y = ds.ldl_solve(linalg.ldl(A, 6), rhs)
    a = [(-e if not ds.is0(e) else 0.0) for e in y]
    lam = {}
    for blk, (Lf, _, dinv), Z in facs:                      # λ = L_j⁻ᵀ D_j⁻¹ (Z_j a + z_j)
        n = len(blk)
        t = [ds.mul(dinv[j], ds.add(ds.dot(Z[j][:6], a), Z[j][6])) for j in range(n)]
        x = [0.0] * n
        for j in reversed(range(n)):
            acc = t[j]
            for i2 in range(j + 1, n):
                Lij = Lf.get((i2, j), 0)
                if not (ds.is0(Lij) or ds.is0(x[i2])):
                    acc = ds.sub(acc, Lij * x[i2])
            x[j] = acc
        lam.update(zip(blk, x))
    return a, lam


def base_solve(tree, b, J, rows, K, l, pA, L, probe):
    """(a'_b (6-list, slid base frame, gravity shifted), {row: λ_row}) at the free base b."""
    m = len(rows)
    if not m:                                                        # no rows: ABA's base (eq. 45)
        return ds.free_solve(tree, b, J, [-x if not ds.is0(x) else 0.0 for x in pA]), {}
    blocks = blocks_of(L, rows)
    if all(invertible(probe, L, blk) for blk in blocks):            # eq. (49)
        return solve_49(L, blocks, rows, K, l, {(x, y): J.HA[x, y] for x in range(6) for y in range(x, 6)}, pA)
    # eq. (47): W = L_D⁻¹ S_bᵀ K_bᵀ with D_b = S_bᵀ H_b S_b = L_D d L_Dᵀ (articulated.py)
    Lf, _, dinv = J.ldl
    S = tree.S[b]
    cols = [ds.mat_t_vec(S, K[j]) for j in range(m)]          # S_bᵀ K_bᵀ, column j
    B = [[cols[j][x] for j in range(m)] + [ds.mat_t_vec(S, pA)[x]] for x in range(6)]
    W = linalg.forward_substitute(Lf, 6, B)
    A = {key: e for key, e in local(L, rows).items()}
    rhs = list(l)
    for x in range(6):
        ws = [ds.mul(e, dinv[x]) for e in W[x]]
        for j in range(m):
            rhs[j] = ds.sub(rhs[j], ds.mul(ws[j], W[x][m]))
            for j2 in range(j, m):
                A[(j, j2)] = ds.add(A.get((j, j2), 0.0), ds.mul(ws[j], W[x][j2]))
    lam_v = solve_dense(A, m, rhs) if m else []
    f = list(pA)                                                        # p_b + K_bᵀ λ
    for j in range(m):
        f = ds.vadd(f, [ds.mul(e, lam_v[j]) for e in K[j]])
    y = ds.free_solve(tree, b, J, f)
    return [(-e if not ds.is0(e) else 0.0) for e in y], dict(zip(rows, lam_v))


def pv(robot, constraints, q, K_bodies, v, tau, k, rec=None):
    tree = ds.Tree(robot, constraints, q, K_bodies)
    qdd, lam = solve(tree, v, tau, k, ds.Probe(robot, q, K_bodies), rec or (lambda *a: None))
    return {"vdot": ds.outputs_vdot(tree, qdd), "lam": ds.column([(-x if not ds.is0(x) else 0.0) for x in lam])}


def solve(tree, v, tau, k, probe, rec):
    """(per-body q̈ lists, λ in the paper's sign as a list over the m rows); ``rec`` gets the
    results sweep by sweep (dynamics_sweeps.Recorder)."""
    robot = tree.robot
    vel, c, _ = tree.velocities(v)
    p = tree.bias_forces(vel)
    rec("first forward sweep: v_i, a_b,i, p_i", vel, c, p)
    abi = articulated_inertias(robot, tree.T)
    rec("backward: articulated inertias H^A, D", [J.HA for J in abi], [J.Dinv for J in abi if J.Dinv is not None])
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    pA = [list(x) for x in p]
    u = [None] * tree.n
    stack = [([], [], []) for _ in range(tree.n)]        # global rows, K^A rows (6-lists), l
    own = tree.targets(k, g)
    for i in range(tree.n):
        for rows, K, lv in own[i]:
            stack[i][0].extend(rows)
            stack[i][1].extend([K[r, c_] for c_ in range(6)] for r in range(len(rows)))
    KS = [None] * tree.n
    L, world, bases = {}, ([], []), []
    for i in reversed(range(tree.n)):
        J, par = abi[i], tree.parent[i]
        rows, K, lv = stack[i]
        if J.free:
            pA[i] = ds.vsub(pA[i], tree.base_wrench(i, tree.vslice(tau, i)))
            bases.append(i)
            continue
        u[i], pa = ds.joint_backward(tree, i, J, pA[i], tree.vslice(tau, i)[0], c[i])
        if par >= 0:
            pA[par] = ds.vadd(pA[par], ds.force(tree.T[i], pa))
        if not rows:
            continue
        kt, Kp, _ = propagate(tree, i, J, K, None, u[i], c[i], with_l=False)
        KS[i] = (rows, kt)
        w = [ds.mul(x, J.Dinv) for x in kt]                               # L += k_i D⁻¹ k_iᵀ
        for a_, ga in enumerate(rows):
            for b_, gb in enumerate(rows):
                if ga <= gb:
                    L[(ga, gb)] = ds.add(L.get((ga, gb), 0.0), ds.mul(w[a_], kt[b_]))
        if par >= 0:
            stack[par][0].extend(rows)
            stack[par][1].extend(ds.force(tree.T[i], row) for row in Kp)   # K P_iᵀ ^iX_λ
        else:
            world[0].extend(rows)
    rec("backward: forces p^A, u", [pA[b] for b in bases], u)
    rec("backward: constraint rows K^A, L^A", [stack[b][1] for b in bases], L)
    # l at the base / the world by its closed form (eq. 30): l_b = l_n + K_n a⁰_n per constrained
    # link n, with a⁰ the roll-out for λ = 0 and a_b = 0 (a_0 = −a_grav at fixed roots), one
    # 6-vector per joint of the constrained paths instead of m_i rows per joint (line 12).
    a0 = [None] * tree.n
    lfin = {}
    for i in range(tree.n):
        if not tree.supports[i]:
            continue
        J, par = abi[i], tree.parent[i]
        if J.free:
            a0[i] = [0.0] * 6
        else:
            y = ds.root_accel(tree, i, g) if par < 0 else ds.motion(tree.T[i], a0[par])
            a0[i] = ds.joint_forward(tree, i, J, y, c[i], u[i])[1]
        for rows, K, lv in own[i]:
            for r, gr in enumerate(rows):
                lfin[gr] = ds.add(lv[r], ds.dot([K[r, c_] for c_ in range(6)], a0[i]))
    for b in bases:
        stack[b][2][:] = [lfin[r] for r in stack[b][0]]
    world[1].extend(lfin[r] for r in world[0])
    rec("l_b = l_n + K_n a⁰_n (eq. 30): forward pass on the constrained paths", [stack[b][2] for b in bases], world)
    lam = {}
    if world[0]:
        lam.update(zip(world[0], solve_dense(local(L, world[0]), len(world[0]), world[1])))
    acc, qdd = [None] * tree.n, [None] * tree.n
    for b in bases:
        rows, K, lv = stack[b]
        acc[b], lam_b = base_solve(tree, b, abi[b], rows, K, lv, pA[b], L, probe)
        lam.update(lam_b)
        qdd[b] = tree.base_qdd(b, acc[b], g[b])
    rec("base solve (eq. 49/47) / root solve (eq. 43)", qdd, lam)
    for i in range(tree.n):
        J, par = abi[i], tree.parent[i]
        if J.free:
            continue
        y = ds.root_accel(tree, i, g) if par < 0 else ds.motion(tree.T[i], acc[par])
        extra = 0.0
        if KS[i]:
            extra = ds.dot(KS[i][1], [lam[r] for r in KS[i][0]])          # ± k_iᵀ λ_i^A
        q1, acc[i] = ds.joint_forward(tree, i, J, y, c[i], u[i], extra, tree.axis[i][1])
        qdd[i] = [q1]
    rec("roll-out: q̈_i, a_i", qdd)
    return qdd, [lam.get(r, 0.0) for r in range(tree.cs.m)]
