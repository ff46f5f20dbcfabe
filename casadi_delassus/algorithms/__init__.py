"""The algorithm registry: one module per algorithm, each exposing a function
``fn(robot, constraints, q, K_bodies) -> {output name: SX}``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import DelassusError, unknown_name


@dataclass(frozen=True)
class Algorithm:
    name: str
    fn: Callable
    summary: str
    outputs: dict = field(default_factory=dict)


def _registry():
    from . import naive
    delassus_out = {"delassus": "Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ (m x m), rows/cols in constraint order"}
    algos = [Algorithm("naive", naive.delassus, "CRBA + Jacobian + dense LDLᵀ of M", delassus_out)]
    from . import pv_osim
    algos.append(Algorithm("pv_osim", pv_osim.delassus, "PV-OSIM: articulated inertias + constraint propagation, O(n + m²d)", delassus_out))
    return {a.name: a for a in algos}


ALGORITHMS = _registry()


def get_algorithm(name):
    if name not in ALGORITHMS:
        raise DelassusError(unknown_name("algorithm", name, ALGORITHMS))
    return ALGORITHMS[name]
