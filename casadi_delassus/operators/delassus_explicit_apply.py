"""Explicit Delassus product: λ ↦ Λ⁻¹ λ through the matrix Λ⁻¹ (``delassus``, which the registry
gives: the cheapest explicit Delassus algorithm, registry.explicit_delassus), then a symmetric
matrix-vector product over its structurally non-zero entries.

The explicit baseline of the matrix-free Delassus operator (delassus_apply.py) in the
matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Sec. VI-B and Table I.  Staged
[q] | [lam] (codegen/staging.py), a new vector costs only the O(m²) product.
"""
from __future__ import annotations

import casadi as ca

from ..symbolic import linalg
from ..symbolic.scalar import dot


def apply(robot, constraints, q, K_bodies, lam, delassus):
    m = constraints.m
    A = linalg.upper_entries(delassus(robot, constraints, q, K_bodies))
    x = [lam[j] for j in range(m)]
    y = [dot([A[(min(i, j), max(i, j))] for j in range(m)], x) for i in range(m)]
    return {"delassus_explicit_apply": ca.vertcat(*[ca.SX(e) for e in y])}
