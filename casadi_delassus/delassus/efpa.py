"""efpa — the Extended-Force-Propagator Algorithm for Λ⁻¹ = J M⁻¹ Jᵀ.

EFPA paper ../shared/papers/003_3d6496c5334b6d59.txt, Table I (Sec. IV: inward recursion
(6)-(11), outward recursion (12)-(14)), in the constraint-space form of the PV-OSIMr paper
../shared/papers/000_82174d5af858539c.txt, Alg. 2, in local link frames:

  backward sweep  H^A_λ(i) += ^λP_i H^A_i                 (articulated inertias, eq. (10))
                  ^λK_j = ^iK_j ^λP_iᵀ,  j ∈ ES(i)          (extended propagators, eq. (11)/(12))
  forward sweep   (⁰Ω_i ^iK_jᵀ) = ^λP_iᵀ (⁰Ω_λ ^λK_jᵀ) + ^λΩ_i ^iK_jᵀ,  j ∈ ES(i)   (eq. (13))
  assembly        ⁰Λ⁻¹_ij = ^cK_i (⁰Ω_c ^cK_jᵀ),  c = cca(i, j)                      (eq. (14))

with ^λP_i = ^iX_λᵀ (1 − U_i D_i⁻¹ S_iᵀ), ^λΩ_i = S_i D_i⁻¹ S_iᵀ, U_i = H^A_i S_i, D_i = S_iᵀ U_i.

The articulated inertias and the projections across each joint (with their structural zeros:
what crosses joint i has no component along S_i) are articulated.py's; the transforms are
frames.py's, in frames slid along the joint axes (frames.choose_offsets).

Beyond Alg. 2, two identities cut work without changing the sweeps: ⁰Λ⁻¹_ab may be formed as
(^cK_b (⁰Ω_c ^cK_aᵀ))ᵀ when that K has more structural zeros, and a diagonal block below a
parent λ as ^λK_a (⁰Ω_λ ^λK_aᵀ) + (K_a S) D⁻¹ (K_a S)ᵀ (the last forward step folded in,
since K_a ^λP_iᵀ = ^λK_a is known from the backward sweep)."""
from __future__ import annotations

from ..sweeps.articulated import articulated_inertias
from ..sweeps.constraint_space import assemble, cca, support
from ..symbolic import passes
from ..symbolic.frames import slid_transforms, transform_force, transform_motion
from ..symbolic.linalg import entries, gram_cost, sym
from ..symbolic.scalar import dot, is_zero


def sparse_first(art, vectors):
    """A root's joint with D's LDLᵀ eliminating first the S-coordinates in which the force
    vectors to solve for are most often exact zeros (a zero leading entry skips a whole
    column of the forward substitution)."""
    if art.axis is not None:
        return art
    nv = art.S.shape[1]
    zeros = [sum(is_zero(dot(art.S[:, c], f)) for f in vectors) for c in range(nv)]
    order = sorted(range(nv), key=lambda c: -zeros[c])
    return art.rebased(art.S[:, order]) if order != list(range(nv)) else art


def propagate_rows(robot, constraints, T, abi, K_bodies, ES):
    """^λK_j = ^iK_j ^λP_iᵀ for every ancestor link of j (Alg. 2 lines 3-11): K_at[j][i]."""
    K_at = [{c.body: entries(K)} for c, K in zip(constraints.constraints, K_bodies)]
    for i in reversed(range(robot.n_bodies)):
        p = robot.parent(i)
        if p >= 0:
            for j in ES[i]:
                K_at[j][p] = [transform_force(T[i], abi[i].force(f)) for f in K_at[j][i]]
    return K_at


def diagonal(robot, abi, K_at, Phi, ES, a, i):
    """K_a ⁰Ω_i K_aᵀ, upper entries once.  When no other constraint needs ⁰Ω_i ^iK_aᵀ, the
    last forward step may be folded in: K_a ^λP_iᵀ = ^λK_a (from the backward sweep), so
    K_a ⁰Ω_i K_aᵀ = ^λK_a (⁰Ω_λ ^λK_aᵀ) + (K_a S_i) D_i⁻¹ (K_a S_i)ᵀ — cheaper unless K_a is
    sparse and numeric (then K_a ⁰Ω_i K_aᵀ is nearly free); the cheaper form is taken."""
    p = robot.parent(i)
    Ka = K_at[a][i]
    if p >= 0 and ES[i] == [a]:
        W = [abi[i].omega(f) for f in Ka]
        step = 24 * len(Ka)                                  # one forward step (6-vector columns)
        if gram_cost(K_at[a][p], Phi[a][p]) + gram_cost(Ka, W) + 2 * len(Ka) ** 2 < \
                step + gram_cost(Ka, Phi[a][i]):
            Kp, Pp = K_at[a][p], Phi[a][p]
            return sym(len(Ka), lambda r, s: dot(Kp[r], Pp[s]) + dot(Ka[r], W[s]))
    return sym(len(Ka), lambda r, s: dot(Ka[r], Phi[a][i][s]))


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    passes.done("articulated inertias H^A", [art.HA for art in abi])
    ES = support(robot, constraints)
    K_at = propagate_rows(robot, constraints, T, abi, K_bodies, ES)
    passes.done("backward: extended force propagators ^λK_j", K_at)
    for r in range(robot.n_bodies):
        if robot.parent(r) < 0:
            abi[r] = sparse_first(abi[r], [f for j in ES[r] for f in K_at[j][r]])
    # forward sweep (Alg. 2 lines 12-17): Phi[j][i] = columns of ⁰Ω_i ^iK_jᵀ
    Phi = [dict() for _ in constraints.constraints]
    for i in range(robot.n_bodies):
        p = robot.parent(i)
        for j in ES[i]:
            if p >= 0:
                Phi[j][i] = [abi[i].motion(transform_motion(T[i], col), f) for col, f in zip(Phi[j][p], K_at[j][i])]
            else:
                Phi[j][i] = [abi[i].omega(f) for f in K_at[j][i]]
    passes.done("forward: ⁰Ω_i ^iK_jᵀ", Phi)
    # assembly (Alg. 2 lines 18-19): ⁰Λ⁻¹_ab = ^cK_a (⁰Ω_c ^cK_bᵀ), upper blocks only
    body = [c.body for c in constraints.constraints]
    blocks = {}
    for a in range(len(body)):
        for b in range(a + 1, len(body)):
            c = cca(robot, body[a], body[b])
            if c is None:
                continue
            # ^cK_a (⁰Ω_c ^cK_bᵀ) or, equal by symmetry, (^cK_b (⁰Ω_c ^cK_aᵀ))ᵀ: the one
            # whose K has more structural zeros
            if gram_cost(K_at[a][c], Phi[b][c], False) <= gram_cost(K_at[b][c], Phi[a][c], False):
                blocks[(a, b)] = [[dot(Ka, Pb) for Pb in Phi[b][c]] for Ka in K_at[a][c]]
            else:
                Bt = [[dot(Kb, Pa) for Pa in Phi[a][c]] for Kb in K_at[b][c]]
                blocks[(a, b)] = [list(col) for col in zip(*Bt)]
        blocks[(a, a)] = diagonal(robot, abi, K_at, Phi, ES, a, body[a])
    return {"delassus": assemble(robot, constraints, blocks)}
