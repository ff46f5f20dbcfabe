"""The algorithm registry: one module per algorithm, each exposing a function
``fn(robot, constraints, q, K_bodies, **inputs) -> {output name: SX}``, where ``inputs`` are
the vector inputs the algorithm declares (names from ``VECTOR_INPUTS``), as SX symbols."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import DelassusError, unknown_name


# name -> (size: "nv" or "m", meaning); generated functions take them after q, before any K
VECTOR_INPUTS = {
    "v": ("nv", "joint velocities, Pinocchio layout (base: [linear; angular] in the base frame)"),
    "tau": ("nv", "joint forces/torques (zero on the free base)"),
    "k": ("m", "desired constraint-space accelerations, rows in constraint order: J v̇ + J̇ v = k with K_i "
               "applied to the link's spatial acceleration (6D weld: Pinocchio's LOCAL constraint acceleration; "
               "3D point: Pinocchio's classical acceleration − ω × v_p)"),
    "R": ("m", "constraint compliance (soft weights), positive, rows in constraint order"),
    "lam": ("m", "a constraint-space vector, rows in constraint order"),
    "a": ("nv", "joint accelerations v̇, Pinocchio layout (base: [linear; angular] in the base frame)"),
}


@dataclass(frozen=True)
class Algorithm:
    name: str
    fn: Callable
    summary: str
    outputs: dict = field(default_factory=dict)
    inputs: tuple = ()          # names from VECTOR_INPUTS


def _registry():
    from . import naive
    delassus_out = {"delassus": "Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ (m x m), rows/cols in constraint order"}
    algos = [Algorithm("naive", naive.delassus, "CRBA + Jacobian + dense LDLᵀ of M", delassus_out)]
    from . import pv_osim
    algos.append(Algorithm("pv_osim", pv_osim.delassus, "PV-OSIM: articulated inertias + constraint propagation, O(n + m²d)", delassus_out))
    from . import pv_osimr
    algos.append(Algorithm("pv_osimr", pv_osimr.delassus, "PV-OSIMr: PV-OSIM between branching links only, O(n + m²)", delassus_out))
    from . import pv_osim_fast
    algos.append(Algorithm("pv_osim_fast", pv_osim_fast.delassus, "PV-OSIM-fast: Λ by the matrix inversion lemma at the floating base", {
        "Lb_ldl": "LDLᵀ of L_b^A (m x m; unit-lower L below the diagonal, D on it; no fill between branches)",
        "K_b": "K_b^A, the constraint rows at each free base (m x 6r, base coordinates [angular; linear])",
        "schur_ldl": "LDLᵀ of H_b^A + K_b^Aᵀ (L_b^A)⁻¹ K_b^A (6r x 6r, packed as Lb_ldl): "
                     "Λ = L_b⁻¹ − L_b⁻¹ K_b schur⁻¹ K_bᵀ L_b⁻¹",
        **delassus_out, "osim": "operational-space inertia Λ (m x m), assembled for checking"}))
    from . import efpa
    algos.append(Algorithm("efpa", efpa.delassus, "EFPA: articulated inertias + extended force propagators, O(n + md + m²)", delassus_out))
    from . import kjr
    algos.append(Algorithm("kjr", kjr.delassus, "KJR: articulated inertias, inverse inertias from a common ancestor, O(n + m²d)", delassus_out))
    from . import ltl_osim
    algos.append(Algorithm("ltl_osim", ltl_osim.delassus, "LTL-OSIM: CRBA + Jacobian, sparse M = LᵀDL, Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ", delassus_out))
    from . import damped_inverse_apply, delassus_apply
    algos.append(Algorithm("delassus_apply", delassus_apply.apply,
                           "Matrix-free Λ⁻¹λ: merged Jᵀλ / ABA / J ν̇ sweeps, O(n + m)",
                           {"delassus_apply": "Λ⁻¹ λ = J M⁻¹ Jᵀ λ (m), rows in constraint order"}, inputs=("lam",)))
    algos.append(Algorithm("damped_inverse_apply", damped_inverse_apply.apply,
                           "Matrix-free damped inverse (R⁻¹ + Λ⁻¹)⁻¹ a: matrix inversion lemma + constrained ABA, O(n + m)",
                           {"damped_inverse_apply": "(diag(R)⁻¹ + J M⁻¹ Jᵀ)⁻¹ a with a = the lam input"},
                           inputs=("R", "lam")))
    algos += _dynamics()
    return {a.name: a for a in algos}


def _dynamics():
    """Forward/inverse and constrained dynamics (PV paper ../shared/papers/004_52dd6d88d839fc14.txt)."""
    from . import aba, ltl, ltl_soft, pv, pv_early, pv_soft, rnea
    vdot = {"vdot": "joint accelerations v̇ (nv), Pinocchio layout (base: [linear; angular] of the base frame)"}
    lam = {"lam": "constraint multipliers λ (m), rows in constraint order: M v̇ + c(q, v) = τ + Jᵀ λ "
                  "(Pinocchio's data.lambda_c; the PV paper's λ is −λ)"}
    hard, soft = ("v", "tau", "k"), ("v", "tau", "k", "R")
    return [
        Algorithm("aba", aba.aba, "ABA: unconstrained forward dynamics, O(n)", vdot, ("v", "tau")),
        Algorithm("rnea", rnea.rnea, "RNEA: inverse dynamics τ = M v̇ + c, O(n)",
                  {"tau": "joint forces τ = M(q) a + c(q, v) (nv), Pinocchio layout"}, ("v", "a")),
        Algorithm("pv", pv.pv, "PV: Popov-Vereshchagin constrained dynamics (PV Alg. 1), O(n + m²d + m³)",
                  vdot | lam, hard),
        Algorithm("pv_early", pv_early.pv_early, "PV-early: PV with rank-1 early multiplier elimination, O(n + m)",
                  vdot | lam, hard),
        Algorithm("pv_soft", pv_soft.pv_soft, "PV-soft: soft Gauss principle by ABA on augmented inertias, O(n + m)",
                  vdot | {"lam": "soft constraint forces λ = −R⁻¹ (J v̇ + J̇ v − k) (m): M v̇ + c = τ + Jᵀ λ"}, soft),
        Algorithm("ltl", ltl.ltl, "LTL: CRBA + sparse M = LᵀDL + Delassus Schur complement, O(nd² + md² + m²d + m³)",
                  vdot | lam, hard),
        Algorithm("ltl_soft", ltl_soft.ltl_soft, "LTL-soft: sparse LᵀDL of M + Jᵀ R⁻¹ J (MuJoCo-style soft Gauss)",
                  vdot | {"lam": "soft constraint forces λ = −R⁻¹ (J v̇ + J̇ v − k) (m): M v̇ + c = τ + Jᵀ λ"}, soft),
    ]


ALGORITHMS = _registry()


AUTO = "auto"   # not an algorithm: the cheapest Delassus algorithm for the robot and constraints


def delassus_algorithms():
    return [name for name, a in ALGORITHMS.items() if "delassus" in a.outputs]


def get_algorithm(name):
    if name not in ALGORITHMS:
        raise DelassusError(unknown_name("algorithm", name, [*ALGORITHMS, AUTO]))
    return ALGORITHMS[name]
