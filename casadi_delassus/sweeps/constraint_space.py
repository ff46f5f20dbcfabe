"""Constraint-space passes shared by the Delassus algorithms (PV-OSIMr paper
../shared/papers/000_82174d5af858539c.txt; EFPA paper ../shared/papers/003_3d6496c5334b6d59.txt):
which constraints each link supports and where two meet (ES(i), cca), the assembly of Λ⁻¹
from blocks (EFPA, KJR); PV-OSIM's backward sweep of the constraint rows to the free bases,
its symmetric rank-1 updates of L^A and the update at a free joint, PV eq. (48), in a basis led
by the children's joint axes (PV-OSIM, PV-OSIM-fast, PV-OSIMr).  In local link frames,
Featherstone's [angular; linear] order; rows act on motions."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..symbolic import linalg
from ..symbolic.frames import transform_rows
from ..symbolic.scalar import dot, is_zero
from ..symbolic.spatial import sx


def support(robot, constraints):
    """ES(i): the constraints (end-effectors) whose link is i or a descendant of i."""
    ES = [[] for _ in range(robot.n_bodies)]
    for e, c in enumerate(constraints.constraints):
        for i in robot.ancestors(c.body):
            ES[i].append(e)
    return ES


def cca(robot, a, b):
    """Closest common ancestor of links a and b (either itself included); None when they
    hang from different roots (a forest), so they do not couple."""
    anc = set(robot.ancestors(a))
    return next((i for i in robot.ancestors(b) if i in anc), None)


def assemble(robot, constraints, blocks):
    """Λ⁻¹ from its upper blocks {(a, b): m_a x m_b lists}, diagonal blocks symmetric."""
    upper = {}
    for (a, b), B in blocks.items():
        ra, rb = constraints.offsets[a], constraints.offsets[b]
        for r, row in enumerate(B):
            for s, e in enumerate(row):
                key = (ra + r, rb + s)
                upper[key if key[0] <= key[1] else key[::-1]] = e
    return linalg.to_sx(upper, constraints.m)


def sr1(L, rows, v, Dinv):
    """L += v D⁻¹ vᵀ on the upper entries keyed by global rows."""
    w = v * Dinv
    for p, gp in enumerate(rows):
        for q, gq in enumerate(rows):
            if gp <= gq:
                L[(gp, gq)] = L.get((gp, gq), 0) + w[p] * v[q]


def joint_update(L, rows, art, v):
    """L += v D_i⁻¹ vᵀ for v = K S_i (m x n_i SX) at joint ``art`` (an SR1 update for one DoF,
    through D_i's LDLᵀ factors for several), on the upper entries keyed by global rows."""
    if not art.multi:
        sr1(L, rows, v, art.Dinv)
        return
    for (p, q), e in art.gram(linalg.entries(v)).items():
        key = (rows[p], rows[q]) if rows[p] <= rows[q] else (rows[q], rows[p])
        L[key] = L.get(key, 0) + e


# Lead axes (their largest entry 1) must be this far from dependent: D expressed in a basis of
# nearly parallel axes through one point loses digits as 1 / their angle (iCub's hips, 2.7e-6 rad
# apart in its URDF, cost pv_osim 5e-6 of Λ⁻¹); a 1e-3 margin costs at most ~1e3 ε.
LEAD_RCOND = 1e-3


def lead_axes(T, abi, children, most=6):
    """Up to ``most`` (s, [child, ...]) for the children below a free joint (``children``:
    {child: number of rows}) whose joint axes s (parent coordinates) are numeric: children
    on one axis line share it; the lines that carry the most rows first, their axes linearly
    independent by a margin (LEAD_RCOND).  Rows that came through those children annihilate s
    exactly (K P_cᵀ S_c = 0), unless the child's D_c carries armature (``abi[c].damped``:
    then K P_cᵀ S_c = K S_c A_c / D_c), which leads nothing."""
    lines = []                                             # [s, [children], rows]
    for c in sorted(children):
        s = T[c].parent_axis()
        if s is None or abi[c].damped:
            continue
        s = s / s[np.argmax(np.abs(s))]
        same = next((ln for ln in lines if np.allclose(ln[0], s, atol=1e-12)), None)
        if same is None:
            lines.append([s, [c], children[c]])
        else:
            same[1].append(c)
            same[2] += children[c]
    out = []
    for s, kids, _ in sorted(lines, key=lambda ln: -ln[2]):
        if len(out) < most and np.linalg.matrix_rank(np.column_stack([x for x, _ in out] + [s]), LEAD_RCOND) == len(out) + 1:
            out.append((s, kids))
    return out


# How many axis lines lead the factorization at a free joint: each one more saves a term in
# the entries of its rows but makes D₁₁⁻¹ y₁ denser for every row (README "Design choices,
# measured": two was the best or close to it everywhere).
BASE_LEADS = 2


def lead_rows(T, abi, via, most=BASE_LEADS):
    """``free_update``'s leads for rows that came through the children ``via`` (per row)."""
    leads = lead_axes(T, abi, {c: via.count(c) for c in set(via) if c is not None}, most)
    return [(s, [r for r, v in enumerate(via) if v in kids]) for s, kids in leads]


def free_update(L, rows, art, K, leads=()):
    """L += K S D⁻¹ Sᵀ Kᵀ at a free joint (PV eq. 48), D never inverted.

    ``leads`` = [(s, positions)]: the rows at those positions annihilate the numeric motion s
    exactly (they came through a child joint with axis s).  D is expressed in a basis led by
    those g motions, B = [s_1 .. s_g, columns of S], so each such row has an exact zero among
    its first g coordinates y₁, and factored by blocks: D₁₁ (g x g) kept as its inverse (from
    its LDLᵀ), the Schur complement D₂₂ − L₂₁ D₁₂ (L₂₁ = D₂₁ D₁₁⁻¹) as LDLᵀ.  Then
    entry (a, b) = y₁ₐ·(D₁₁⁻¹ y₁ᵦ) + z₂ₐ·(d⁻¹ z₂ᵦ), z₂ = L⁻¹ (y₂ − L₂₁ y₁): every entry that
    involves a lead row has one term less.  g = 0 is the plain Zᵀ d⁻¹ Z, Z = L⁻¹ Sᵀ Kᵀ."""
    g = len(leads)
    if g:
        art = art.leading([s for s, _ in leads])
    m = len(rows)
    Y = [art.coords([K[r, c] for c in range(6)]) for r in range(m)]
    for col, (_, positions) in enumerate(leads):
        for r in positions:
            Y[r][col] = 0
    D = linalg.entries(art.D)
    if g:
        Di = linalg.spd_inverse({(a, b): D[a][b] for a in range(g) for b in range(a, g)}, g)
        Di = linalg.sym(g, lambda a, b: Di[(a, b)])
        L21 = [[dot(D[i][:g], [Di[c][k] for c in range(g)]) for k in range(g)] for i in range(g, 6)]
        S22 = {(i - g, j - g): D[i][j] - dot(L21[i - g], [D[c][j] for c in range(g)])
               for i in range(g, 6) for j in range(i, 6)}
    else:
        S22 = {(i, j): D[i][j] for i in range(6) for j in range(i, 6)}
    Ls, _, dinv = linalg.ldl(S22, 6 - g)
    Y1 = [y[:g] for y in Y]
    W1 = [[dot(Di[k], y1) for k in range(g)] for y1 in Y1] if g else [[] for _ in Y]
    T2 = [[Y[r][g + i] - (dot(L21[i], Y1[r]) if g else 0) for r in range(m)] for i in range(6 - g)]
    Z2 = linalg.forward_substitute(Ls, 6 - g, T2)
    has_zero = [any(is_zero(x) for x in y1) for y1 in Y1]
    for (p, q), e in linalg.scaled_gram(Z2, dinv, m).items():
        if g:                                  # y₁·D₁₁⁻¹y₁ from the side with the zero
            e = e + (dot(Y1[q], W1[p]) if has_zero[q] and not has_zero[p] else dot(Y1[p], W1[q]))
        key = (rows[p], rows[q]) if rows[p] <= rows[q] else (rows[q], rows[p])
        L[key] = L.get(key, 0) + e


def rows_to_bases(robot, constraints, T, abi, K_bodies):
    """PV-OSIM's backward sweep over the constraint rows (PV-OSIMr paper Alg. 1 lines 11-14),
    leaves first, for T = frames.local_transforms and abi = articulated.articulated_inertias:

        K_λ(i)^A ← [K_λ(i)^A; K_i^A P_iᵀ ^iX_λ(i)],   L^A += K_i^A S_i D_i⁻¹ S_iᵀ K_i^Aᵀ

    Returns (L, stack, via): L^A as upper entries keyed by global constraint rows (one block
    per branch: the zeros between branches are never touched), stack[i] = (global rows,
    K_i^A) of the rows that reach body i, via[i] the child each of them came through.  Rows
    stop at a free joint (its update, PV eq. 48, is ``free_update``)."""
    # K_i^A as (global row indices, SX rows) per body; own constraints first
    stack = [([], None) for _ in robot.bodies]
    for c, K, r0 in zip(constraints.constraints, K_bodies, constraints.offsets):
        idx, M = stack[c.body]
        stack[c.body] = (idx + list(range(r0, r0 + c.rows)), sx(K) if M is None else ca.vertcat(M, sx(K)))
    via = [[None] * len(idx) for idx, _ in stack]   # per row of stack[i]: the child it came through
    L = {}
    for i in reversed(range(robot.n_bodies)):
        rows, K = stack[i]
        if not rows:
            continue
        art = abi[i]
        if art.free:                               # nothing passes a free joint
            continue
        Kp, v = art.project_rows(K)
        joint_update(L, rows, art, v)              # L_i^A + K_i^A S_i D_i⁻¹ S_iᵀ K_i^Aᵀ
        p = robot.parent(i)
        if p >= 0:
            Kp = transform_rows(T[i], Kp)           # K_i^A P_iᵀ ^iX_λ(i)
            pidx, pK = stack[p]
            stack[p] = (pidx + rows, Kp if pK is None else ca.vertcat(pK, Kp))
            via[p] += [i] * len(rows)
    return L, stack, via
