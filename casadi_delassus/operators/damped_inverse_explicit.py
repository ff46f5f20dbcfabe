"""Explicit damped Delassus inverse: a ↦ (diag(R)⁻¹ + Λ⁻¹)⁻¹ a through the matrix Λ⁻¹.

The baseline of the matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt (Sec. VI-B,
Table I, whose explicit route forms Λ⁻¹ by LTL-OSIM and factorises it): here

    Λ⁻¹     by ``delassus(robot, constraints, q, K_bodies)``, which the registry gives: the
            cheapest explicit Delassus algorithm for the robot and constraints
            (registry.explicit_delassus: fewest instructions, with cse);
    A       = diag(1/R) + Λ⁻¹, its dense LDLᵀ (linalg.ldl: structural zeros skipped, every
            pivot inverted once);
    x       = L⁻ᵀ D⁻¹ L⁻¹ a by the two triangular solves (linalg.ldl_solve).

Inputs and output as damped_inverse_apply.py: ``R`` is the paper's stiffness (positive, one
per constraint row; the compliance added to Λ⁻¹ is diag(R)⁻¹), ``lam`` carries a.  A is
positive definite whatever the rank of Λ⁻¹.  Staged [q] | [R] | [lam] (codegen/staging.py)
the parts fall apart as the paper's re-evaluation columns measure them: Λ⁻¹ | diag(1/R) +
LDLᵀ (a new damping) | the solves (a new vector, O(m²)).
"""
from __future__ import annotations

import casadi as ca

from ..symbolic import linalg


def damped_inverse(robot, constraints, q, K_bodies, R, lam, delassus):
    m = constraints.m
    A = linalg.upper_entries(delassus(robot, constraints, q, K_bodies))
    for i in range(m):
        A[(i, i)] = A[(i, i)] + 1 / R[i]
    return {"damped_inverse_explicit": ca.vertcat(*linalg.ldl_solve(linalg.ldl(A, m), [lam[i] for i in range(m)]))}
