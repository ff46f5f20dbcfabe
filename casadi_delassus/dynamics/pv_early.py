"""pv_early — PV with early elimination of the multipliers: rank-1 Householder elimination at
every joint, O(n + m): PV's driver (pv.solve) with the policy "every joint".

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. VIII, eqs. (56)-(68), on top of Alg. 1
(see pv.py for the notation).  At a 1-DoF joint the constraint rows K_i^A that reach it gain
the rank-1 term L_i^A = k_i D_i⁻¹ k_iᵀ, k_i = K_i^A S_i (eq. 57; L is reset to 0 after every
elimination, so L_i^A never needs to be stored, Remark 6).  Its SVD is a Householder reflection
(eqs. 65-67):

    w = k̃ + copysign(‖k̃‖, k̃_1) e_1,   Q = 1 − 2 w wᵀ / wᵀw,   Q k̃ = −copysign(‖k̃‖, k̃_1) e_1,
    Σ_i = ‖k_i‖² / D_i,

computed from k̃ = K_i^A e_a (k_i = ±k̃ for S_i = ±e_a).  ``copysign`` makes sign(0) = +1: a zero
pivot k̃_1 = 0 (common at q = 0) needs no row permutation (Remark 7).  In the rotated basis
[K̃; K̂] = Q K_i^A P_iᵀ, [l̃; l̂] = Q l_i the first multiplier is eliminated at once (eqs. 62-63):

    μ̃ = Σ⁻¹ (K̃ y + l̃),  y = ^iX_λ a_λ,       H_i^a ← H_i^a + K̃ᵀ Σ⁻¹ K̃,   p_i^a ← p_i^a + Σ⁻¹ l̃ K̃ᵀ

(p = −f, so eq. (63)'s f-update changes sign), and only K̂, l̂ (one row fewer) are passed to the
parent.  The roll-out rebuilds λ_i^A = Q [μ̃; μ̂] (eq. 64) with μ̂ from the parent, and the
joint term k_iᵀ λ_i^A = ±(Q k̃)ᵀ[μ̃; μ̂] is one product.  Rows that reach the floating base are
resolved there with its 6 DoF (eq. 47 with L_b^A = 0, linalg.saddle_solve).  The elimination
step (sweeps/elimination.py: ``eliminate``, eqs. 60-63, and ``rebuild``, eqs. 62 and 64) is PV's too: pv uses it where the pivot provably never vanishes and
accumulates L^A = Σ k_i D_i⁻¹ k_iᵀ (Alg. 1 line 11) for the rows that pass a joint without
elimination; pv_early eliminates wherever k̃ is not identically zero.

Structure decided at trace time, from one seeded random configuration (symbolic/probe.py):
a joint eliminates a row only if k̃ is not identically zero there (Remark 8: e.g. a point on
the joint's own axis); rows whose entries are identically zero (the left-over of redundant
constraints, e.g. two welds on one link, Remark 9) are dropped with multiplier 0.  So redundant
but consistent constraints keep working (v̇ is unique; λ is one of the valid multipliers).

A joint of several DoFs (a ball joint) eliminates nothing: the rows pass it with L^A
accumulated as in pv (a rank-3 elimination would need an SVD of the 3-column k_i), so rows that
cross a ball joint reach the base or root solve, as in pv.

Limit (bench/dynamics_accuracy.py and tests/dynamics/test_dynamics.py measure it, README "Hard cases"):
the elimination order is fixed, so a joint whose k̃ vanishes at run time cannot pass its row on.
Exactly zero (Σ⁻¹ = 0 by the guard: no NaN) the row it would eliminate is dropped; near zero it
is eliminated with a huge Σ⁻¹ and digits are lost as 1/δ² at a distance δ from such a
configuration (talos with a welded hand: a 7-DoF arm whose wrist axes align at q = 0), and a
stretched knee under a welded foot (q = 0 on talos, go1) drops the leg's last row.  Where the
hard problem is well-posed there, pv and ltl are exact; a robust pv_early needs a run-time
pivot choice (a row carried to the parent when k̃ is small), which would take its count past
0.8x the papers' (README "Design choices, measured").

Derivatives do not go through that order: the Jacobian is pv's analytical blocks at pv_early's
solution (``derivative``), and JVPs and VJPs take the implicit-function theorem with
``kkt_solve`` (codegen/derivatives.py); only ``pivot`` and redundant rows are differentiated
through the sweeps by AD.
"""
from __future__ import annotations

import casadi as ca

from ..symbolic.scalar import column, neg
from ..sweeps.tree import Tree, check_regular
from ..symbolic.probe import Probe
from ..sweeps.dynamics_derivatives import hard_derivative
from ..sweeps.elimination import is_numeric
from .pv import never_vanishing, solve


def every_joint(tree, i, st, kt, nonzero):
    """pv_early's policy: eliminate wherever k̃ is not identically zero (Sec. VIII)."""
    return nonzero(kt)


def pv_early(robot, constraints, q, K_bodies, v, tau, k):
    tree = Tree(robot, constraints, q, K_bodies)
    probe = Probe(robot, q, K_bodies)
    v, tau = tree.local_inputs(v, tau)
    qdd, lam, _, elim = solve(tree, v, tau, k, probe, every_joint)
    return {"vdot": column(tree.user_vdot([x for qi in qdd for x in qi], v)), "lam": column([neg(x) for x in lam]),
            "pivot": pivot_ratio(elim, probe)}


def kkt_solve(robot, constraints, q, K_bodies, b_tau, b_k):
    """(v̇, λ) = KKT⁻¹ [b_τ; b_k] for the KKT matrix [[M, −Jᵀ], [J, 0]] at q, which pv_early's
    JVPs and VJPs solve with (registry.Algorithm.kkt_solve, the implicit-function theorem):
    PV's sweeps without velocity and gravity terms, with pv's elimination rule on orthonormal
    rows.  Through pv_early's own fixed order the VJP loses the digits its small pivots cost
    and is no longer the JVP's transpose to rounding (bench/derivative_accuracy.py measures
    it); pv's order keeps them.  Redundant rows (the KKT matrix is singular; pv_early drops
    rows, so its solution leaves their equations unmet and the theorem does not apply): the
    ConstraintError of pv's check."""
    probe, zero = Probe(robot, q, K_bodies), [0.0] * robot.nv
    tree = Tree(robot, constraints, q, K_bodies, gravity=False)
    tree.orthonormalize()
    qdd, lam, pivots, _ = solve(tree, zero, b_tau, b_k, probe, never_vanishing, drop=False)
    check_regular(probe, pivots, "pv_early", constraints)
    return (column(tree.user_vdot([x for qi in qdd for x in qi], zero)),
            column([neg(x) for x in tree.multipliers(lam)]))


def derivative(robot, constraints, q, K_bodies, wrt, v, tau, k):
    """∂(v̇, λ)/∂(q, v, τ, k) through the KKT system at pv_early's solution (the analytical
    blocks pv's are, sweeps/dynamics_derivatives.hard_derivative), after ``kkt_solve``'s check
    (on a zero right-hand side, which traces to nothing): redundant rows raise its
    ConstraintError, and codegen/derivatives.py differentiates pv_early by AD instead."""
    kkt_solve(robot, constraints, q, K_bodies, [0.0] * robot.nv, [0.0] * constraints.m)
    return _through_kkt(robot, constraints, q, K_bodies, wrt, v, tau, k)


def pivot_ratio(elim, probe):
    """min over the eliminations whose pivot is not constant of ‖k̃‖² / (its value at the probe):
    1 at a generic configuration, 0 where a row was dropped (Σ⁻¹ = 0), small where the fixed
    elimination order loses digits (see the module docstring).  Two operations per joint."""
    live = [e.nrm2 for e in elim if e is not None and not is_numeric(e.nrm2)]
    ratio = 1.0
    for x, ref in zip(live, probe(live) if live else []):
        ratio = ca.fmin(ratio, x * (1.0 / float(ref)))
    return ratio if isinstance(ratio, ca.SX) else ca.SX(ratio)


_through_kkt = hard_derivative("pv_early", pv_early)
