"""pv — the Popov-Vereshchagin constrained dynamics solver for floating-base trees with
constraints on any link, O(n + m²d + m³).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Alg. 1 (Sec. V-C), eqs. (41)-(48).  The
problem (eq. 36) is Gauss' principle with the motion constraints K_i a_i = k_i; in joint space
M v̇ + c = τ + Jᵀ λ, J v̇ + J̇ v = k (reference.constrained_dynamics; the output ``lam`` is
Pinocchio's λ, the paper's multipliers are −lam).  Three sweeps, in local link frames
(the driver is pv_early.solve, shared with PV-early):

first forward sweep (dynamics_sweeps.Tree): ^iX_λ(i), v_i, a_b,i, p_i = −f_i   (lines 1-5)
    own rows: K_i^A ← K_i,  l_i ← K_i a_grav,i − k_i  (l_i = −k_i with gravity, Sec. III-B2)
backward sweep, leaves first:                                                   (lines 6-12)
    D_i, U_i, H_i^a = P_i H_i^A            (articulated.articulated_inertias, lines 7, 9)
    u_i = τ_i − S_iᵀ p_i^A,  p_λ^A += ^iX_λᵀ (p_i^A + H_i^a a_b,i + Ū_i u_i)        (line 8)
    k_i = K_i^A S_i,  K_λ^A ← [K_λ^A; K_i^A P_iᵀ ^iX_λ],  l shifted by eq. (42d)   (lines 10, 12)
    L^A ← L^A + k_i D_i⁻¹ k_iᵀ  (rows keep their ids: one diagonal block per branch, line 11)
free base b: eq. (47), λ = (L_b + K_b H_b⁻¹ K_bᵀ)⁻¹ (l_b − K_b H_b⁻¹ p_b^A), a_b = −H_b⁻¹ (p_b^A + K_bᵀ λ),
    by the block elimination of dynamics_sweeps.saddle_solve: the branch blocks of L_b one after
    the other against the 6x6 base, with pivots that are diagonal blocks of Schur complements of
    Λ⁻¹ = L_b + K_b H_b⁻¹ K_bᵀ: positive wherever the hard problem is well-posed (talos anchor:
    3.7k operations with the 4 rows per weld below; with Alg. 1's 6 rows 6.5k, eq. (49) 4.3k).  Eq. (49) inverts each branch block of
    L_b, which is singular where the branch alone cannot move its rows (a stretched knee under
    a welded foot: q = 0 on talos, go1, g1, solo12) although Λ⁻¹ is not: it returned NaN there
    and lost up to 1e-1 of v̇ within 1e-8 rad of it.
fixed roots (the world): λ = (L_0^A)⁻¹ (l_0 + K_0^A a_0) (eq. 43), a_0 = −a_grav, pivot-free LDLᵀ.
roll-out, roots first:                                                           (lines 15-17)
    q̈_i = D_i⁻¹ (u_i − U_iᵀ (^iX_λ a_λ + a_b,i) − k_iᵀ λ_i^A),  a_i = ^iX_λ a_λ + a_b,i + S_i q̈_i

Two refinements that compute the same result:
- Early elimination (Sec. VIII, eqs. 60-64) only where the pivot Σ = ‖k̃‖²/D_i provably never
  vanishes: at the constrained link's own joint when k̃ = K_i S_i is a nonzero constant (numeric
  K_i), and at its parent for a numeric full-rank 6-row K_i (the 5 rows left annihilate exactly
  S_i, so there k̃ = 0 only if the parent's joint twist is S_i's: a model property, checked at
  trace time, true at every q or at none).  A 6D weld then brings 4 rows to the base instead of 6
  (talos anchor: 21.8k operations instead of 26.5k for Alg. 1 with the same base solve).
- The rows of each K_i are orthonormalized first (dynamics_sweeps.Tree.orthonormalize): an
  ill-conditioned runtime K_i no longer squares into cond(Λ⁻¹).

Redundant constraints (two welds on one link) make Λ⁻¹ singular for every q: detected at trace
time from the solve's pivots at a random configuration, ConstraintError (pv_early and the soft
solvers handle such sets).  Where Λ⁻¹ is singular only at some configurations (an arm at a
singularity under a 6D weld), the generated code divides by a zero pivot there: non-finite
output, as the hard problem has no unique solution.  Without constraints this is exactly aba.py.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConstraintError
from ..symbolic.scalar import column, neg
from ..sweeps import tree as ds
from . import pv_early as pe

RCOND = 1e-12          # a pivot this small against the largest: Λ⁻¹ singular at the probe


def never_vanishing(tree, i, st, kt, nonzero):
    """pv's elimination policy: where the pivot cannot vanish at any configuration (see above)."""
    if all(pe.is_numeric(x) for x in kt):
        return any(float(x) != 0 for x in kt)
    return st.weld == "reduced" and nonzero(kt)


def check_regular(probe, pivots, name, constraints):
    """ConstraintError when the Delassus solve meets a (numerically) zero pivot at the probe:
    redundant or conflicting constraints, for which the hard multipliers are not unique."""
    vals = probe(pivots) if pivots else np.ones(1)
    if np.all(np.isfinite(vals)) and vals.min() > RCOND * vals.max():
        return
    ok = vals[np.isfinite(vals)]                  # after a zero pivot the rest is inf / nan
    raise ConstraintError(
        f"{name}: the constraints {constraints.specs} are redundant or conflicting: J M⁻¹ Jᵀ is singular at a "
        f"random configuration (smallest pivot {np.abs(ok).min():.1e} against {ok.max():.1e}), so the hard "
        f"multipliers are not unique; pv_early (drops redundant rows) or pv_soft / ltl_soft (compliance R) "
        f"solve such sets")


def pv(robot, constraints, q, K_bodies, v, tau, k, rec=None):
    tree = ds.Tree(robot, constraints, q, K_bodies)
    tree.orthonormalize()
    probe = ds.Probe(robot, q, K_bodies)
    qdd, lam, pivots, _ = pe.solve(tree, v, tau, k, probe, rec or (lambda *a: None), never_vanishing, drop=False)
    check_regular(probe, pivots, "pv", constraints)
    lam = tree.multipliers(lam)
    return {"vdot": column([x for qi in qdd for x in qi]), "lam": column([neg(x) for x in lam])}
