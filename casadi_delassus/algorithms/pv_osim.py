"""PV-OSIM — the Delassus matrix from the Popov-Vereshchagin solver's backward sweep.

PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Alg. 1; PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Alg. 2 and eqs. (42a), (42c), (42e), (48).
O(n + m²d).  Two sweeps, in local link frames (slid along the joint axes where that zeroes
offsets, frames.choose_offsets):

  forward (kinematics):   ^iX_λ(i)(q)
  backward, leaves first: H_i^A (articulated.py), and for every link supporting constraints
      K_λ(i)^A ← [K_λ(i)^A; K_i^A P_iᵀ ^iX_λ(i)]                       (Alg. 1 line 13)
      L_λ(i)^A ← blkdiag(L_λ(i)^A, L_i^A + K_i^A S_i D_i⁻¹ S_iᵀ K_i^Aᵀ)   (Alg. 1 line 14)
  at a free joint b:       Λ⁻¹ = L_b^A + K_b^A (H_b^A)⁻¹ K_b^Aᵀ          (PV eq. 48)

K_i^A P_iᵀ = K_i^A − (K_i^A S_i) Ū_iᵀ with Ū_i = U_i D_i⁻¹; for S_i = ±e_a its column a is
an exact zero.  (H_b^A)⁻¹ is never formed: with D_b = L d Lᵀ, the update is Zᵀ d⁻¹ Z for
Z = L⁻¹ S_bᵀ K_b^Aᵀ.  L^A is kept as its upper entries keyed by global constraint rows, so
the block-diagonal zeros between branches are never touched.
"""
from __future__ import annotations

import casadi as ca

from ..spatial import sx
from . import linalg
from .articulated import articulated_inertias
from .frames import choose_offsets, local_transforms, transform_rows


def project_rows(J, K):
    """K Pᵀ = K − (K S) Ūᵀ for one 1-DoF joint; also returns v = K S (the SR1 vector)."""
    if J.axis is not None:
        v = J.sign * K[:, J.axis]
    else:
        v = ca.mtimes(K, sx(J.S))
    Kp = K - ca.mtimes(v, J.Ubar.T)
    if J.axis is not None:
        Kp[:, J.axis] = 0                      # K Pᵀ S = 0 exactly
    return Kp, v


def sr1(L, rows, v, Dinv):
    """L += v D⁻¹ vᵀ on the upper entries keyed by global rows."""
    w = v * Dinv
    for p, gp in enumerate(rows):
        for q, gq in enumerate(rows):
            if gp <= gq:
                L[(gp, gq)] = L.get((gp, gq), 0) + w[p] * v[q]


def free_update(L, rows, J, K):
    """L += K S D⁻¹ Sᵀ Kᵀ at a free joint through the LDLᵀ of D (never inv)."""
    Lf, _, dinv = J.ldl
    B = ca.mtimes(sx(J.S).T, K.T)               # Sᵀ Kᵀ: a row permutation
    Z = linalg.forward_substitute(Lf, 6, [[B[r, c] for c in range(len(rows))] for r in range(6)])
    for (p, q), e in linalg.scaled_gram(Z, dinv, len(rows)).items():
        key = (rows[p], rows[q]) if rows[p] <= rows[q] else (rows[q], rows[p])
        L[key] = L.get(key, 0) + e


def sweeps(robot, constraints, q, K_bodies, free_update_=True):
    """The backward sweep's results: {'X', 'abi', 'L', 'stack'} (L: upper entries of Λ⁻¹,
    stack[i]: (global rows, K_i^A)).  Without ``free_update_``, L stops at L_b^A: the
    update of PV eq. (48) at free joints is left to the caller (PV-OSIM-fast)."""
    T = local_transforms(robot, q, choose_offsets(robot, constraints))
    X = [t.X for t in T]
    abi = articulated_inertias(robot, T)
    # K_i^A as (global row indices, SX rows) per body; own constraints first
    stack = [([], None) for _ in robot.bodies]
    for c, K, r0 in zip(constraints.constraints, K_bodies, constraints.offsets):
        idx, M = stack[c.body]
        stack[c.body] = (idx + list(range(r0, r0 + c.rows)), sx(K) if M is None else ca.vertcat(M, sx(K)))
    L = {}
    for i in reversed(range(robot.n_bodies)):
        rows, K = stack[i]
        if not rows:
            continue
        J = abi[i]
        if J.free:
            if free_update_:
                free_update(L, rows, J, K)         # PV eq. (48); nothing passes a free joint
            continue
        Kp, v = project_rows(J, K)
        sr1(L, rows, v, J.Dinv)                    # L_i^A + K_i^A S_i D_i⁻¹ S_iᵀ K_i^Aᵀ
        p = robot.parent(i)
        if p >= 0:
            Kp = transform_rows(T[i], Kp)           # K_i^A P_iᵀ ^iX_λ(i)
            pidx, pK = stack[p]
            stack[p] = (pidx + rows, Kp if pK is None else ca.vertcat(pK, Kp))
    return {"X": X, "abi": abi, "L": L, "stack": stack}


def delassus(robot, constraints, q, K_bodies):
    L = sweeps(robot, constraints, q, K_bodies)["L"]
    return {"delassus": linalg.to_sx(L, constraints.m)}
