"""Matrix-free damped Delassus inverse: a ↦ Λ_R a = (R⁻¹ + J M⁻¹ Jᵀ)⁻¹ a in O(n + m).

Matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Sec. V: by the matrix
inversion lemma (its eq. 8),

    Λ_R = R − R J (M + Jᵀ R J)⁻¹ Jᵀ R,

evaluated in its four steps: λ_R = R a; ν̇_R = M_R⁻¹ Jᵀ λ_R; a_R = J ν̇_R; λ = λ_R − R a_R.
M_R = M + Jᵀ R J is solved by the loop-constrained articulated-body recursion (its Alg. 4):
the ABA of delassus_apply.py over modified spatial inertias H_i + Σ_e K_e^iᵀ R_e K_e^i
(line 4), couplings K_e^Aᵀ R_e K_e^B between the two bodies of a link-to-link constraint
(line 9, eliminated through the neighbour sets of articulated.articulated_inertias), and
joint rows' R added to their joint's D_i (line 11), with the force and acceleration sweeps
merged as in its Sec. V-D.

Conventions of the generated function (q, R, lam):
- ``R`` is the paper's R exactly: a positive diagonal *stiffness*, one entry per constraint
  row; the compliance added to the Delassus matrix is R⁻¹ (so Λ_R = (diag(1/R) + Λ⁻¹)⁻¹).
- ``lam`` carries the constraint-space vector a (the paper's a_c) that Λ_R is applied to.
M_R is positive definite whatever the rank of J, so a rank-deficient Λ⁻¹ is fine.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..sweeps.articulated import articulated_inertias
from ..sweeps.joint_space import link_rows
from ..sweeps.matrix_free import constraint_accelerations, constraint_forces, inverse_inertia_sweeps
from ..symbolic.frames import slid_transforms
from ..symbolic.spatial import sx


def _weighted_gram(K, w):
    """Upper entries of Kᵀ diag(w) K (6x6) for K (rows x 6, numeric or SX), w (rows, SX)."""
    ent = {}
    numeric = isinstance(K, np.ndarray)
    for a in range(6):
        for b in range(a, 6):
            e = 0
            for r in range(K.shape[0]):
                if numeric:
                    k = float(K[r, a] * K[r, b])
                    if k == 0:
                        continue
                    term = w[r] if k == 1 else -w[r] if k == -1 else k * w[r]
                else:
                    term = K[r, a] * K[r, b] * w[r]
                e = term if isinstance(e, int) else e + term
            ent[(a, b)] = e
    return ent


def stiffness_terms(constraints, rows, R):
    """Alg. 4 lines 3-11 for the stiffness R: ({body: [Kᵀ R K]}, {(A, B): K_Aᵀ R K_B},
    {joint body: [R per DoF]})."""
    extra, coupling, damping = {}, {}, {}
    for c, pairs, r0 in zip(constraints.constraints, rows, constraints.offsets):
        w = [R[r0 + r] for r in range(c.rows)]
        for i, K in pairs:
            extra.setdefault(i, []).append(_weighted_gram(K if isinstance(K, np.ndarray) else sx(K), w))
        if len(pairs) == 2:
            (A, KA), (B, KB) = pairs
            C = ca.mtimes(sx(KA).T, ca.mtimes(ca.diag(ca.vertcat(*w)), sx(KB)))
            coupling[(A, B)] = coupling[(A, B)] + C if (A, B) in coupling else C
        if c.joint:
            d = damping.setdefault(c.body, [0] * c.rows)
            for k in range(c.rows):
                d[k] = d[k] + w[k]
    return extra, coupling, damping


def apply(robot, constraints, q, K_bodies, R, lam):
    T = slid_transforms(robot, constraints, q)
    rows = link_rows(robot, constraints, T, K_bodies)
    extra, coupling, damping = stiffness_terms(constraints, rows, R)
    abi = articulated_inertias(robot, T, extra, coupling=coupling, damping=damping)
    lam_R = R * lam                                                   # step 1: λ_R = R a
    a, nu = inverse_inertia_sweeps(robot, T, abi, *constraint_forces(robot, constraints, rows, lam_R))
    a_R = constraint_accelerations(constraints, rows, a, nu)          # step 3
    return {"damped_inverse_apply": lam_R - R * a_R}                  # step 4
