"""pv_soft — constrained dynamics under the soft Gauss principle (MuJoCo-style soft equality
constraints) by one ABA on augmented inertias, O(n + m).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. VI, eqs. (50)-(52).  The problem is

    v̇ = argmin ½ ‖v̇ − v̇_free‖²_M + ½ rᵀ R⁻¹ r,     r = J v̇ + J̇ v − k  (= K_i a_i − k_i per link)

with R = diag(R_1, …) > 0 the compliance of each row (input "R"; the paper's weight is R⁻¹).
Equivalently (M + Jᵀ R⁻¹ J) v̇ = τ − c − Jᵀ R⁻¹ (J̇ v − k) (reference.soft_dynamics), and the
constraint force is λ = −R⁻¹ r, so that M v̇ + c = τ + Jᵀ λ as for the hard solvers.  Expanding
the penalty per link (eq. 51) leaves Gauss' principle of the same tree without constraints and
with, on every constrained link (eq. 52),

    H_i ← H_i + K_iᵀ R_i⁻¹ K_i,      f_i ← f_i + K_iᵀ R_i⁻¹ k'_i   (p_i ← p_i + K_iᵀ R_i⁻¹ l_i)

where k'_i = k_i − K_i a_grav,i = −l_i accounts for gravity as the world's acceleration
(Sec. III-B2).  "Algorithm 1 reduces simply to ABA with the update in eq. (52)": aba.solve on
the augmented inertias and forces; the roll-out gives a'_i, hence λ_i = −R_i⁻¹ (K_i a'_i + l_i).
Always solvable, also for redundant constraints.
"""
from __future__ import annotations

from ..symbolic.scalar import column, dot, mul, sub
from ..sweeps.dynamics_derivatives import soft_derivative
from ..sweeps.tree import Tree, soft_terms
from .aba import solve as aba_solve


def pv_soft(robot, constraints, q, K_bodies, v, tau, k, R):
    tree = Tree(robot, constraints, q, K_bodies)
    inertia, forces, rinv = soft_terms(tree, R, k)
    v, tau = tree.local_inputs(v, tau)
    qdd, acc, g = aba_solve(tree, v, tau, inertia, forces)
    lam = [0.0] * constraints.m
    for i, own in enumerate(tree.targets(k, g, negate=True)):
        for rows, K, nl in own:
            for r, gr in enumerate(rows):                   # λ = −R⁻¹ (K a' + l) = R⁻¹ (k' − K a')
                lam[gr] = mul(rinv[gr], sub(nl[r], dot([K[r, a] for a in range(6)], acc[i])))
    return {"vdot": column(tree.user_vdot([x for qi in qdd for x in qi], v)), "lam": column(lam)}


derivative = soft_derivative("pv_soft", pv_soft)
