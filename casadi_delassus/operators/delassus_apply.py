"""Matrix-free Delassus operator: λ ↦ Λ⁻¹ λ = J M⁻¹ Jᵀ λ in O(n + m), never forming Λ⁻¹.

Matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Alg. 1 (Jᵀλ), Alg. 2 (M⁻¹τ by
the articulated-body algorithm without bias terms), Alg. 3 (J ν̇), merged into two sweeps as
its Sec. IV-D says:

  backward, leaves first (after the articulated inertias, articulated.py):
      f_i ← Σ_e K_e^iᵀ λ_e (constraint rows on body i)  +  Σ_children ^cX_iᵀ (f_c − Ū_c u_c)
      u_i = S_iᵀ f_i + 𝒦_iᵀ λ_i                        (Alg. 1 lines 6, 8 merged into Alg. 2 line 3)
  forward, roots first:
      a'_i = ^iX_λ(i) a_λ(i),  ν̇_i = D_i⁻¹ (u_i − U_iᵀ a'_i),  a_i = a'_i + S_i ν̇_i
      (Λ⁻¹λ)_e = Σ_i K_e^i a_i,  (Λ⁻¹λ)_joint = 𝒦_i ν̇_i   (Alg. 3 lines 6, 8 on the same a_i, ν̇_i)

A link-to-link constraint A|B has rows on both bodies (K_B from the relative transform,
joint_space.link_rows); a joint constraint JOINT:NAME adds a joint force and reads ν̇ of its
joint.  Only bodies whose subtree carries a force or a joint force take part in the sweeps
(elsewhere f = 0 and a is not needed).  A free joint keeps D_b as LDLᵀ factors
(articulated.py) and is solved by substitution, never inverted.

The passes (sweeps/matrix_free.py) are shared with damped_inverse_apply.py, which runs them
over modified articulated inertias with couplings between the bodies of link-to-link
constraints (Alg. 4).
"""
from __future__ import annotations

from ..sweeps.articulated import articulated_inertias
from ..sweeps.joint_space import link_rows
from ..sweeps.matrix_free import constraint_accelerations, constraint_forces, inverse_inertia_sweeps
from ..symbolic.frames import slid_transforms


def apply(robot, constraints, q, K_bodies, lam):
    T = slid_transforms(robot, constraints, q)
    rows = link_rows(robot, constraints, T, K_bodies)
    abi = articulated_inertias(robot, T)
    a, nu = inverse_inertia_sweeps(robot, T, abi, *constraint_forces(robot, constraints, rows, lam))
    return {"delassus_apply": constraint_accelerations(constraints, rows, a, nu)}
