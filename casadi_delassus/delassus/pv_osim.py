"""PV-OSIM — the Delassus matrix from the Popov-Vereshchagin solver's backward sweep.

PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Alg. 1; PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Alg. 2 and eqs. (42a), (42c), (42e), (48).
O(n + m²d).  Two sweeps, in local link frames (slid along the joint axes where that zeroes
offsets, frames.choose_offsets):

  forward (transforms):   ^iX_λ(i)(q)
  backward, leaves first: H_i^A (articulated.py), and for every link supporting constraints
      K_λ(i)^A ← [K_λ(i)^A; K_i^A P_iᵀ ^iX_λ(i)]                       (Alg. 1 line 13)
      L_λ(i)^A ← blkdiag(L_λ(i)^A, L_i^A + K_i^A S_i D_i⁻¹ S_iᵀ K_i^Aᵀ)   (Alg. 1 line 14)
  at a free joint b:       Λ⁻¹ = L_b^A + K_b^A (H_b^A)⁻¹ K_b^Aᵀ          (PV eq. 48)

K_i^A P_iᵀ = K_i^A − (K_i^A S_i) Ū_iᵀ with Ū_i = U_i D_i⁻¹; for S_i = ±e_a its column a is
an exact zero (articulated.py).  L^A is kept as its upper entries keyed by global constraint
rows, so the block-diagonal zeros between branches are never touched.

(H_b^A)⁻¹ is never formed.  The rows that reach b through a child c annihilate c's joint axis
s_c (numeric in b's coordinates: the joint motion leaves its own axis fixed), so D_b is
expressed in a basis led by the axes of the children that carry the most rows and factored
by blocks (``free_update``): those rows then have an exact zero coordinate, and each entry
of K_b^A (H_b^A)⁻¹ K_b^Aᵀ that involves one has a term less (README "Design choices,
measured").
"""
from __future__ import annotations

from ..sweeps.articulated import articulated_inertias
from ..sweeps.constraint_space import free_update, lead_rows, rows_to_bases
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    L, stack, via = rows_to_bases(robot, constraints, T, abi, K_bodies)
    bases = [b for b, (rows, _) in enumerate(stack) if rows and abi[b].free]
    passes.done("articulated inertias H^A",              # what the row sweep reads: Ū_i, and H_b^A at the bases
                [art.HA if art.free else art.Ubar for art, (rows, _) in zip(abi, stack) if rows])
    passes.done("constraint rows K^A propagated to the base", [stack[b][1] for b in bases])
    passes.done("L^A: SR1 updates K S D⁻¹ Sᵀ Kᵀ", dict(L))
    for b in bases:                                              # PV eq. (48)
        free_update(L, stack[b][0], abi[b], stack[b][1], lead_rows(T, abi, via[b]))
    return {"delassus": linalg.to_sx(L, constraints.m)}
