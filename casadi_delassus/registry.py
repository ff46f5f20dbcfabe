"""The algorithm registry, plain data: one module per algorithm, each exposing a function
``fn(robot, constraints, q, K_bodies, **inputs) -> {output name: SX}``, where ``inputs`` are
the vector inputs the algorithm declares (names from ``VECTOR_INPUTS``), as SX symbols.  The
registry lists ``fn`` as the module defines it; what the tracer does around the call (refusing
constraints an algorithm does not handle, k − K̇ v for world-aligned rows) is in
codegen/trace.py, ``traced_outputs``."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import casadi as ca

from .errors import ConstraintError, DelassusError, unknown_name
from .opcount import count_ops


# name -> (size: "nv" or "m", meaning); generated functions take them after q, before any K
VECTOR_INPUTS = {
    "v": ("nv", "joint velocities, Pinocchio layout (base: [linear; angular] in the base frame)"),
    "tau": ("nv", "joint forces/torques (zero on the free base)"),
    "k": ("m", "desired constraint-space accelerations, rows in constraint order: J v̇ + J̇ v = k with K_i "
               "applied to the link's spatial acceleration (6D weld: Pinocchio's LOCAL constraint acceleration; "
               "3D point: Pinocchio's classical acceleration − ω × v_p); world-aligned rows: the time derivative "
               "of their velocity (3d-world: Pinocchio's LOCAL_WORLD_ALIGNED classical acceleration; 6d-world: "
               "the frame origin's classical and the angular acceleration, world axes)"),
    "R": ("m", "constraint compliance (soft weights), positive, rows in constraint order"),
    "lam": ("m", "a constraint-space vector, rows in constraint order"),
    "a": ("nv", "joint accelerations v̇, Pinocchio layout (base: [linear; angular] in the base frame)"),
}


# The matrix-free paper's R (../shared/papers/001_a194bdf892a0cc2c.txt, eq. 8) is a stiffness,
# the inverse of the compliance VECTOR_INPUTS["R"] describes for the soft dynamics solvers.
STIFFNESS_R = ("constraint stiffness (the matrix-free paper's R), positive, rows in constraint order: "
               "the compliance added to the Delassus matrix is diag(R)⁻¹")


@dataclass(frozen=True)
class Algorithm:
    name: str
    fn: Callable
    summary: str
    outputs: dict = field(default_factory=dict)
    inputs: tuple = ()          # names from VECTOR_INPUTS
    input_meanings: dict = field(default_factory=dict)   # this algorithm's meaning where VECTOR_INPUTS' differs
    # re-evaluation stages after the first ("factor": q and runtime K): ((name, (input, ...)), ...);
    # empty: one "apply" stage with every vector input (codegen/staging.py)
    stages: tuple = ()
    loops: bool = False         # accepts link-to-link (A|B) and joint (JOINT:NAME) constraints
    # analytical Jacobians: derivative(robot, constraints, q, K_bodies, wrt, **inputs) ->
    # {f"d{output}_d{input}": SX (output entries, column-major, x columns)} for the inputs named
    # in ``wrt`` (a tuple of q and vector input names, never K_<link>); q columns are tangent directions δ of q ⊕ δ
    # (model/integrate.py), nv of them.  An entry it leaves out is differentiated by CasADi
    # (codegen/derivatives.py); None: all are.
    derivative: Callable | None = None
    # its own solve of the hard problem's KKT system, for JVPs and VJPs by the implicit-function
    # theorem where AD through its sweeps loses digits: kkt_solve(robot, constraints, q, K_bodies,
    # b_tau, b_k) -> (v̇, λ) = [[M, −Jᵀ], [J, 0]]⁻¹ [b_τ; b_k] (codegen/derivatives.py)
    kkt_solve: Callable | None = None

    def input_meaning(self, name):
        return self.input_meanings.get(name, VECTOR_INPUTS[name][1])

    def accepts(self, constraints):
        return self.loops or not constraints.non_unary

    def require(self, robot, constraints):
        """ConstraintError, naming the algorithms that take them, for a robot or constraints ``fn``
        does not handle (coupled mimic joints; A|B, JOINT:NAME); the tracer asks before calling
        ``fn`` (codegen/trace.py)."""
        if self.name != COUPLED_ALGORITHM and getattr(robot, "coupling", None) is not None:
            # the recursions run over independent joints
            raise ConstraintError(f"algorithm {self.name!r} treats every joint as independent; robot {robot.name!r} "
                                  f"has coupled mimic joints (mimic=True, --mimic): use -a {COUPLED_ALGORITHM}")
        if not self.accepts(constraints):
            raise ConstraintError(
                f"algorithm {self.name!r} handles constraints between one link and the world only, not "
                f"{', '.join(c.spec for c in constraints.non_unary)}; link-to-link (A|B) and joint (JOINT:NAME) "
                f"constraints need one of: {', '.join(loop_algorithms())}")


# ``auto`` traces the Delassus algorithms whose tracing time and size grow linearly with the
# number of bodies; naive (O(n³)) and ltl_osim (O(n d²)) only up to CHEAP_NV degrees of
# freedom (Talos, nv 50, traces all seven in seconds; naive on chain:n=300 ran over 9 minutes
# and 5 GB), or when none of the linear ones accepts the constraints (link-to-link rows).
AUTO = "auto"   # not an algorithm: the cheapest Delassus algorithm for the robot and constraints
LINEAR_TIME = ("pv_osim", "pv_osimr", "efpa", "kjr", "pv_osim_fast")
CHEAP_NV = 64
AUTO_RULE = (f"auto: the fewest instructions among {', '.join(LINEAR_TIME)} (linear in the number of bodies), "
             f"plus naive and ltl_osim when nv <= {CHEAP_NV} or no linear one accepts the constraints")


# ``auto`` among solvers with the same inputs and outputs (contact-mode libraries pick one per
# contact set, casadi_delassus/contact_modes/): the fewest instructions among these.
AUTO_FAMILIES = {
    "auto_hard": ("pv", "ltl"),                                   # hard constrained dynamics: v̇, λ
    "auto_soft": ("pv_soft", "ltl_soft"),                         # soft constrained dynamics: v̇, λ
    "auto_apply": ("delassus_apply", "delassus_explicit_apply"),  # Λ⁻¹λ
    "auto_damped": ("damped_inverse_apply", "damped_inverse_explicit"),   # (R⁻¹ + Λ⁻¹)⁻¹ a
}


# the one algorithm that works in a coupled robot's reduced coordinates (model/mimic.py)
COUPLED_ALGORITHM = "naive"


def is_auto(algorithm):
    """``auto`` or one of AUTO_FAMILIES: an algorithm chosen per robot and constraint set."""
    return algorithm == AUTO or algorithm in AUTO_FAMILIES


def auto_candidates(robot, constraints, family=AUTO):
    """The algorithms ``auto`` (or the AUTO_FAMILIES entry ``family``) traces for this robot and
    constraint set (see AUTO_RULE)."""
    if family != AUTO:
        return [a for a in AUTO_FAMILIES[family] if ALGORITHMS[a].accepts(constraints)]
    if getattr(robot, "coupling", None) is not None:
        return [COUPLED_ALGORITHM]
    accepted = [a for a in delassus_algorithms() if ALGORITHMS[a].accepts(constraints)]
    linear = [a for a in accepted if a in LINEAR_TIME]
    return accepted if robot.nv <= CHEAP_NV or not linear else linear


def cheapest_delassus(robot, constraints, instructions, candidates=None, label="Delassus algorithm"):
    """The one choice of the cheapest algorithm (``-a auto``, an AUTO_FAMILIES entry, the explicit
    operators): among the Delassus algorithms (or ``candidates``, when given) that accept these
    constraints, the one with the fewest ``instructions(name)``, the first in registry order on a
    tie; one whose tracing refuses the constraints (ConstraintError, e.g. redundant rows) is
    skipped.  Returns (name, {algorithm: instructions}, [refused algorithms])."""
    pool = delassus_algorithms() if candidates is None else [a for a in ALGORITHMS if a in candidates]
    counts, refused = {}, []
    for a in pool:
        if ALGORITHMS[a].accepts(constraints):
            try:
                counts[a] = instructions(a)
            except ConstraintError:
                refused.append(a)
    if not counts:
        raise ConstraintError(f"no {label} accepts the constraints {constraints.specs}"
                              + (f" (refused by {', '.join(refused)})" if refused else ""))
    return min(counts, key=counts.get), counts, refused


# (robot fingerprint, constraint specs) -> the explicit operators' algorithm: both operators and
# every re-trace of a scenario make the same choice, which traces them all
_EXPLICIT = {}


def explicit_delassus(robot, constraints, q, K_bodies):
    """(name, Λ⁻¹ as SX) of the Delassus algorithm the explicit operators build on: the fewest
    instructions of Λ⁻¹ (counted with cse) among those that return Λ⁻¹ alone (PV-OSIM-fast also
    assembles Λ, O(m³) to trace; its Λ⁻¹ is PV-OSIM's)."""
    key = (robot.fingerprint(), tuple(constraints.specs))
    traced = {}

    def instructions(name):
        traced[name] = D = ALGORITHMS[name].fn(robot, constraints, q, K_bodies)["delassus"]
        return count_ops(ca.Function("count", ca.symvar(D), ca.cse([ca.densify(D)])))["instructions"]
    if key not in _EXPLICIT:
        _EXPLICIT[key] = cheapest_delassus(robot, constraints, instructions,
                                           [a for a in delassus_algorithms() if set(ALGORITHMS[a].outputs) == {"delassus"}])[0]
    name = _EXPLICIT[key]
    return name, traced[name] if name in traced else ALGORITHMS[name].fn(robot, constraints, q, K_bodies)["delassus"]


def explicit_delassus_matrix(robot, constraints, q, K_bodies):
    """Λ⁻¹ of ``explicit_delassus``, injected into the explicit operators."""
    return explicit_delassus(robot, constraints, q, K_bodies)[1]


def _registry():
    from .delassus import naive
    delassus_out = {"delassus": "Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ (m x m), rows/cols in constraint order"}
    algos = [Algorithm("naive", naive.delassus, "CRBA + Jacobian + dense LDLᵀ of M", delassus_out, loops=True)]
    from .delassus import pv_osim
    algos.append(Algorithm("pv_osim", pv_osim.delassus, "PV-OSIM: articulated inertias + constraint propagation, O(n + m²d)", delassus_out))
    from .delassus import pv_osimr
    algos.append(Algorithm("pv_osimr", pv_osimr.delassus, "PV-OSIMr: PV-OSIM between branching links only, O(n + m²)", delassus_out))
    from .delassus import pv_osim_fast
    algos.append(Algorithm("pv_osim_fast", pv_osim_fast.delassus, "PV-OSIM-fast: Λ by the matrix inversion lemma at the floating base", {
        "Lb_ldl": "LDLᵀ of L_b^A (m x m; unit-lower L below the diagonal, D on it; no fill between branches)",
        "K_b": "K_b^A, the constraint rows at each free base (m x 6r, base coordinates [angular; linear])",
        "schur_ldl": "LDLᵀ of H_b^A + K_b^Aᵀ (L_b^A)⁻¹ K_b^A (6r x 6r, packed as Lb_ldl): "
                     "Λ = L_b⁻¹ − L_b⁻¹ K_b schur⁻¹ K_bᵀ L_b⁻¹",
        **delassus_out, "osim": "operational-space inertia Λ (m x m), assembled for checking"}))
    from .delassus import efpa
    algos.append(Algorithm("efpa", efpa.delassus, "EFPA: articulated inertias + extended force propagators, O(n + md + m²)", delassus_out))
    from .delassus import kjr
    algos.append(Algorithm("kjr", kjr.delassus, "KJR: articulated inertias, inverse inertias from a common ancestor, O(n + m²d)", delassus_out))
    from .delassus import ltl_osim
    algos.append(Algorithm("ltl_osim", ltl_osim.delassus, "LTL-OSIM: CRBA + Jacobian, sparse M = LᵀDL, Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ",
                           delassus_out, loops=True))
    algos += _operators()
    algos += _dynamics()
    return {a.name: a for a in algos}


def _operators():
    """Λ⁻¹λ and the damped inverse, matrix-free and through the explicit Λ⁻¹ (matrix-free paper
    ../shared/papers/001_a194bdf892a0cc2c.txt); staged as its Table I re-evaluates them."""
    from .operators import damped_inverse_apply, damped_inverse_explicit, delassus_apply, delassus_explicit_apply
    explicit_damped = functools.partial(damped_inverse_explicit.damped_inverse, delassus=explicit_delassus_matrix)
    explicit_product = functools.partial(delassus_explicit_apply.apply, delassus=explicit_delassus_matrix)
    product = "Λ⁻¹ λ = J M⁻¹ Jᵀ λ (m), rows in constraint order"
    damped = "(diag(R)⁻¹ + J M⁻¹ Jᵀ)⁻¹ a with a = the lam input (m), rows in constraint order"
    damped_io = dict(inputs=("R", "lam"), input_meanings={"R": STIFFNESS_R},
                     stages=(("damping", ("R",)), ("apply", ("lam",))))
    return [
        Algorithm("delassus_apply", delassus_apply.apply, "Matrix-free Λ⁻¹λ: merged Jᵀλ / ABA / J ν̇ sweeps, O(n + m)",
                  {"delassus_apply": product}, inputs=("lam",), loops=True),
        Algorithm("damped_inverse_apply", damped_inverse_apply.apply,
                  "Matrix-free damped inverse (R⁻¹ + Λ⁻¹)⁻¹ a: matrix inversion lemma + loop-constrained ABA, O(n + m)",
                  {"damped_inverse_apply": damped}, **damped_io, loops=True),
        Algorithm("delassus_explicit_apply", explicit_product,
                  "Explicit Λ⁻¹λ: the cheapest explicit Λ⁻¹, then the product, O(explicit + m²)",
                  {"delassus_explicit_apply": product}, inputs=("lam",), loops=True),
        Algorithm("damped_inverse_explicit", explicit_damped,
                  "Explicit damped inverse: the cheapest explicit Λ⁻¹, + diag(1/R), dense LDLᵀ, two solves, O(explicit + m³)",
                  {"damped_inverse_explicit": damped}, **damped_io, loops=True),
    ]


def _dynamics():
    """Forward/inverse and constrained dynamics (PV paper ../shared/papers/004_52dd6d88d839fc14.txt)."""
    from .dynamics import aba, ltl, ltl_soft, pv, pv_early, pv_soft, rnea
    vdot = {"vdot": "joint accelerations v̇ (nv), Pinocchio layout (base: [linear; angular] of the base frame)"}
    lam = {"lam": "constraint multipliers λ (m), rows in constraint order: M v̇ + c(q, v) = τ + Jᵀ λ "
                  "(Pinocchio's data.lambda_c; the PV paper's λ is −λ)"}
    hard, soft = ("v", "tau", "k"), ("v", "tau", "k", "R")
    return [
        Algorithm("aba", aba.aba, "ABA: unconstrained forward dynamics, O(n)", vdot, ("v", "tau"),
                  derivative=aba.derivative),
        Algorithm("rnea", rnea.rnea, "RNEA: inverse dynamics τ = M v̇ + c, O(n)",
                  {"tau": "joint forces τ = M(q) a + c(q, v) (nv), Pinocchio layout"}, ("v", "a"),
                  derivative=rnea.derivative),
        Algorithm("pv", pv.pv, "PV: Popov-Vereshchagin constrained dynamics (PV Alg. 1), O(n + m²d + m³)",
                  vdot | lam, hard, derivative=pv.derivative),
        Algorithm("pv_early", pv_early.pv_early, "PV-early: PV with rank-1 early multiplier elimination, O(n + m)",
                  vdot | lam | {"pivot": "smallest elimination pivot ‖k̃_i‖² relative to its value at a generic "
                                         "configuration (1): near 0 the fixed elimination order loses digits, 0 means "
                                         "a row was dropped (exact only for a redundant row); pv and ltl are exact there"},
                  hard, derivative=pv_early.derivative, kkt_solve=pv_early.kkt_solve),
        Algorithm("pv_soft", pv_soft.pv_soft, "PV-soft: soft Gauss principle by ABA on augmented inertias, O(n + m)",
                  vdot | {"lam": "soft constraint forces λ = −R⁻¹ (J v̇ + J̇ v − k) (m): M v̇ + c = τ + Jᵀ λ"}, soft,
                  derivative=pv_soft.derivative),
        Algorithm("ltl", ltl.ltl, "LTL: CRBA + sparse M = LᵀDL + Delassus Schur complement, O(nd² + md² + m²d + m³)",
                  vdot | lam, hard, derivative=ltl.derivative),
        Algorithm("ltl_soft", ltl_soft.ltl_soft, "LTL-soft: sparse LᵀDL of M + Jᵀ R⁻¹ J (MuJoCo-style soft Gauss)",
                  vdot | {"lam": "soft constraint forces λ = −R⁻¹ (J v̇ + J̇ v − k) (m): M v̇ + c = τ + Jᵀ λ"}, soft,
                  derivative=ltl_soft.derivative),
    ]


ALGORITHMS = _registry()


def loop_algorithms():
    """The algorithms that accept link-to-link and joint constraints."""
    return [name for name, a in ALGORITHMS.items() if a.loops]


def delassus_algorithms():
    return [name for name, a in ALGORITHMS.items() if "delassus" in a.outputs]


def dynamics_algorithms():
    """The constrained-dynamics solvers (outputs v̇ and λ, given desired accelerations k)."""
    return [name for name, a in ALGORITHMS.items() if "vdot" in a.outputs and "k" in a.inputs]


def get_algorithm(name):
    if not isinstance(name, str) or name not in ALGORITHMS:
        raise DelassusError(unknown_name("algorithm", str(name), [*ALGORITHMS, AUTO]) +
                            f" (the algorithms: {', '.join(ALGORITHMS)}; {AUTO} picks the cheapest Delassus one)")
    return ALGORITHMS[name]
