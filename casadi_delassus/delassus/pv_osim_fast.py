"""PV-OSIM-fast — the operational-space inertia Λ of a floating-base tree through the matrix
inversion lemma, without forming (or factorizing) the dense Λ⁻¹.

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. VII-B, eqs. (53)-(55): with L_b^A
the constraint-space inverse inertia of PV-OSIM's backward sweep (pv_osim.py), which is
block-diagonal (one block per branch at the free base b), and K_b^A the rows at b,

    Λ = (L_b^A + K_b^A (H_b^A)⁻¹ K_b^Aᵀ)⁻¹ = Λ_b − L_K (H_b^A + K_b^Aᵀ L_K)⁻¹ L_Kᵀ,
    Λ_b = (L_b^A)⁻¹,  L_K = Λ_b K_b^A.

As the paper says, the right-hand side is meant to be applied to vectors, so the outputs are
factors: ``Lb_ldl`` (LDLᵀ of L_b^A in natural row order: no fill between branches),
``K_b`` (m x 6r, r free bases) and ``schur_ldl`` (LDLᵀ of H_b^A + K_b^Aᵀ (L_b^A)⁻¹ K_b^A,
6r x 6r); both packed as unit-lower L below the diagonal and D on it.  Then
Λ x = y − L_b⁻¹ K_b schur⁻¹ K_bᵀ y with y = L_b⁻¹ x: two sparse LDLᵀ solves and 6r-wide
products.  ``delassus`` (Λ⁻¹, eq. 48) and ``osim`` (Λ) are assembled for checking.

Limitation (the paper's): every branch block of L_b^A must be invertible.  A tree whose base
is fixed, or carries a constraint itself, puts its whole block of Λ⁻¹ into Lb_ldl instead
(no lemma there).  So does a tree with a branch whose block is singular at every
configuration, found at the trace-time probe (``branch_conditioning``, symbolic/probe.py): a branch
with fewer DoF than its constraint rows (a biped's 3-DoF leg under a 6D sole) or a point on
a joint axis (a quadruped's 3D point at its knee), where Λ⁻¹ itself can be well conditioned.
The lemma would divide by the zero pivots of that block; the whole tree's LDLᵀ does not.
A branch block that is singular only at some configurations (a straight or folded knee
under a 3D foot) still is at those: Λ_b and the factors are not finite there, and near them
eq. (55) forms a well-conditioned Λ as the difference of two terms ‖Λ‖ / ‖Λ_b‖ =
λmin(L_b^A) / λmin(Λ⁻¹) times smaller, losing that many digits in ``osim`` and more in its
derivatives (verify/derivatives.py redraws such points and counts them).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..sweeps.articulated import articulated_inertias
from ..sweeps.constraint_space import free_update, lead_rows, rows_to_bases
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms
from ..symbolic.probe import SAMPLES, SINGULAR_BLOCK, Probe


def _packed(L, D, n):
    """Unit-lower L strictly below the diagonal, D on it."""
    M = ca.SX.zeros(n, n)
    for (i, j), e in L.items():
        M[i, j] = e
    for i in range(n):
        M[i, i] = D[i]
    return M


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    Lb, stack, via = rows_to_bases(robot, constraints, T, abi, K_bodies)   # PV-OSIM without eq. (48)
    m = constraints.m
    bases = [i for i, art in enumerate(abi) if art.free and stack[i][0]]
    passes.done("articulated inertias H^A",              # what the row sweep reads: Ū_i, and H_b^A at the bases
                [art.HA if art.free else art.Ubar for art, (rows, _) in zip(abi, stack) if rows])
    passes.done("constraint rows K^A propagated to the base", [stack[i][1] for i in bases])
    passes.done("L_b^A: SR1 updates", dict(Lb))
    full = dict(Lb)                                  # Λ⁻¹ (PV eq. 48), for checking
    own = {c.body for c in constraints.constraints}
    mil = [i for i in bases if i not in own]        # L_b^A has only branch blocks there
    ratios = branch_conditioning(Probe(robot, q, K_bodies, SAMPLES), Lb, {i: _branches(stack[i][0], via[i]) for i in mil})
    mil = [i for i in mil if ratios[i] > SINGULAR_BLOCK]
    for i in bases:
        free_update(full, stack[i][0], abi[i], stack[i][1], lead_rows(T, abi, via[i]))
        if i not in mil:                             # no lemma: this tree's Λ⁻¹ goes to Lb
            rows = stack[i][0]
            Lb.update({(a, b): full[(a, b)] for a in rows for b in rows if (a, b) in full})
    r6 = 6 * max(len(mil), 1)
    Kb = ca.SX.zeros(m, r6)
    for c, i in enumerate(mil):
        for p, g in enumerate(stack[i][0]):
            Kb[g, 6 * c:6 * c + 6] = stack[i][1][p, :]
    L, D, Dinv = linalg.ldl(Lb, m)                   # Λ_b = (L_b^A)⁻¹ through its factors
    Z = linalg.forward_substitute(L, m, [[Kb[g, a] for a in range(r6)] for g in range(m)])
    S = linalg.scaled_gram(Z, Dinv, r6)              # K_bᵀ (L_b^A)⁻¹ K_b
    for c, i in enumerate(mil):
        for a in range(6):
            for b in range(a, 6):                    # + H_b^A
                S[(6 * c + a, 6 * c + b)] = S[(6 * c + a, 6 * c + b)] + abi[i].HA[a, b]
    if not mil:
        S = {(a, b): float(a == b) for a in range(6) for b in range(a, 6)}
    Ls, Ds, Dsinv = linalg.ldl(S, r6)
    out = {"Lb_ldl": _packed(L, D, m), "K_b": Kb, "schur_ldl": _packed(Ls, Ds, r6)}
    passes.done("factors: LDLᵀ of L_b^A, schur and its LDLᵀ (eq. 55)", out)
    # for checking: Λ⁻¹ (eq. 48) and Λ = Λ_b − Λ_b K_b S⁻¹ K_bᵀ Λ_b (eq. 55) assembled
    delassus_ = linalg.to_sx(full, m)
    passes.done("checking output: Λ⁻¹", delassus_)
    W = linalg.forward_substitute(Ls, r6, [[Z[g][a] * Dinv[g] for g in range(m)] for a in range(r6)])
    osim = linalg.ldl_inverse(L, Dinv, m)           # Λ_b from the factors output above
    for k, e in linalg.scaled_gram([linalg.back_substitute(L, m, w) for w in W], Dsinv, m).items():
        osim[k] = osim[k] - e
    return {"delassus": delassus_, **out, "osim": linalg.to_sx(osim, m)}   # Λ⁻¹ first, as every algorithm's f(q)


def _branches(rows, via):
    """The global rows at a free base grouped by the child (branch) they came through."""
    groups = {}
    for g, child in zip(rows, via):
        groups.setdefault(child, []).append(g)
    return list(groups.values())


def branch_conditioning(probe, Lb, branches):
    """{base: λmin/λmax of its worst-conditioned branch block of L_b^A, the best over the probe's
    samples (configurations and runtime K)}."""
    blocks = [(base, rows) for base, groups in branches.items() for rows in groups]
    if not blocks:
        return {}
    values = probe.at_samples([Lb.get((min(a, b), max(a, b)), 0) for _, rows in blocks for a in rows for b in rows])
    best = {base: 0.0 for base, _ in blocks}          # over samples, of the worst block's λmin/λmax
    for sample in values:
        worst, k = {}, 0
        for base, rows in blocks:
            eig = np.linalg.eigvalsh(sample[k:k + len(rows) ** 2].reshape(len(rows), len(rows)))
            k += len(rows) ** 2
            ratio = eig[0] / eig[-1] if np.all(np.isfinite(eig)) and eig[-1] > 0 else 0.0
            worst[base] = min(worst.get(base, 1.0), ratio)
        best = {base: max(best[base], worst[base]) for base in best}
    return best
