"""Explicit damped Delassus inverse: a ↦ (diag(R)⁻¹ + Λ⁻¹)⁻¹ a through the matrix Λ⁻¹.

The baseline of the matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt (Sec. VI-B,
Table I, whose explicit route forms Λ⁻¹ by LTL-OSIM and factorises it): here

    Λ⁻¹     by the cheapest explicit Delassus algorithm of the registry for the robot and
            constraints (fewest instructions, with cse), or the one named by ``base``;
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

from ..opcount import count_ops
from ..errors import ConstraintError
from ..symbolic import linalg


def _delassus_of(name, robot, constraints, q, K_bodies):
    from ..registry import get_algorithm
    return get_algorithm(name).fn(robot, constraints, q, K_bodies)["delassus"]


# (robot fingerprint, constraint specs) -> the cheapest algorithm's name: both explicit
# operators and every re-trace of a scenario make the same choice, which traces them all
_CHEAPEST = {}


def cheapest_delassus(robot, constraints, q, K_bodies):
    """(name, Λ⁻¹ as SX) of the explicit Delassus algorithm with the fewest instructions
    (counted with cse) among those that accept these constraints.  Algorithms that also
    assemble Λ (PV-OSIM-fast, O(m³) to trace) are left out: their Λ⁻¹ is PV-OSIM's."""
    from ..registry import ALGORITHMS, delassus_algorithms
    key = (robot.fingerprint(), tuple(constraints.specs))
    if key in _CHEAPEST:
        return _CHEAPEST[key], _delassus_of(_CHEAPEST[key], robot, constraints, q, K_bodies)
    best = None
    for name in delassus_algorithms():
        if "osim" in ALGORITHMS[name].outputs:
            continue
        try:
            D = _delassus_of(name, robot, constraints, q, K_bodies)
        except ConstraintError:          # e.g. link-to-link rows some algorithms reject
            continue
        n = count_ops(ca.Function("count", ca.symvar(D), ca.cse([ca.densify(D)])))["instructions"]
        if best is None or n < best[0]:
            best = (n, name, D)
    if best is None:
        raise ConstraintError("no explicit Delassus algorithm accepts these constraints")
    _CHEAPEST[key] = best[1]
    return best[1], best[2]


def explicit_delassus(robot, constraints, q, K_bodies, base=None):
    """Upper entries {(i, j): e} of Λ⁻¹ from ``base`` (default: the cheapest)."""
    D = cheapest_delassus(robot, constraints, q, K_bodies)[1] if base is None else \
        _delassus_of(base, robot, constraints, q, K_bodies)
    return linalg.upper_entries(D)


def damped_inverse(robot, constraints, q, K_bodies, R, lam, base=None):
    m = constraints.m
    A = explicit_delassus(robot, constraints, q, K_bodies, base)
    for i in range(m):
        A[(i, i)] = A[(i, i)] + 1 / R[i]
    return {"damped_inverse_explicit": ca.vertcat(*linalg.ldl_solve(linalg.ldl(A, m), [lam[i] for i in range(m)]))}
