"""What a contact-mode library computes and which function computes each mode.

A library's *kind* follows from its algorithm:

- ``delassus``: ``auto`` (the fewest instructions among the Delassus algorithms, per mode,
  codegen/trace.py) or one Delassus algorithm; output Λ⁻¹ (and Λ with ``osim``), whatever
  else the algorithm outputs (pv_osim_fast's factors are left out);
- ``dynamics``: a constrained-dynamics solver (pv, pv_early, pv_soft, ltl, ltl_soft), or
  ``auto_hard`` (pv or ltl) / ``auto_soft`` (pv_soft or ltl_soft), the fewest instructions
  per mode among solvers of the same inputs and outputs; outputs v̇ and λ;
- ``operator``: a matrix-free or explicit operator (delassus_apply, damped_inverse_apply and
  their explicit forms), or ``auto_apply`` / ``auto_damped`` choosing between the two forms
  per mode.

The empty mode (no active constraint): a Delassus or operator library has nothing to
compute (Λ⁻¹ is 0 × 0, Λ⁻¹λ has no rows) and no function; a dynamics library runs ``aba``
(unconstrained: λ has no rows; pv_early's ``pivot`` is 1, nothing eliminated).

Every mode with a function is an ordinary generated function (codegen/build.py) with its own
manifest and cache key, in ``<library folder>/<mode>/<algorithm>.*``; its scenario is the
library's plus the mode (``4F3_m5``), so its C name is ``cd_<model>_4F3_m5_<algorithm>``.  The
full set is the exception: it is the scenario's own function, the one ``generate`` makes
(``<library folder>/../<algorithm>.*``, ``cd_<model>_4F3_<algorithm>``), built once for both.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..registry import AUTO, AUTO_FAMILIES, VECTOR_INPUTS, delassus_algorithms, dynamics_algorithms, get_algorithm
from ..runtime import artifact
from ..codegen.build import content_hash
from ..codegen.trace import OSIM_MEANING
from ..constraints import ConstraintSet
from ..errors import DelassusError
from ..names import ident_part
from .modes import active, mode_name

EMPTY_MODE_ALGORITHM = "aba"          # the dynamics of the empty mode
# per-instance shape of each output a library may have: "m" = the active constraint rows
OUTPUT_SHAPES = {"delassus": ("m", "m"), "osim": ("m", "m"), "vdot": ("nv", 1), "lam": ("m", 1), "pivot": (1, 1),
                 "delassus_apply": ("m", 1), "damped_inverse_apply": ("m", 1),
                 "delassus_explicit_apply": ("m", 1), "damped_inverse_explicit": ("m", 1)}
OUTPUT_MEANINGS = {"delassus": "Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ (m x m), rows/cols in constraint order",
                   "osim": OSIM_MEANING}
# what an output holds in a mode whose function does not compute it, when not empty
EMPTY_VALUES = {"pivot": 1.0}
LIBRARY_SUFFIX = "_modes"


def kind_of(algorithm):
    """'delassus', 'dynamics' or 'operator' (module docstring); DelassusError otherwise."""
    if algorithm == AUTO or algorithm in delassus_algorithms():
        return "delassus"
    if algorithm in ("auto_hard", "auto_soft") or algorithm in dynamics_algorithms():
        return "dynamics"
    if algorithm in ("auto_apply", "auto_damped") or "lam" in get_algorithm(algorithm).inputs:
        return "operator"
    raise DelassusError(f"algorithm {algorithm!r} does not depend on the constraints, so a contact-mode library of "
                        f"it would hold one function: use a Delassus algorithm (or auto), a constrained-dynamics "
                        f"solver (or auto_hard, auto_soft) or an operator (or auto_apply, auto_damped)")


def prototype(algorithm):
    """The algorithm whose inputs and outputs the library has (an auto family's first)."""
    return AUTO_FAMILIES[algorithm][0] if algorithm in AUTO_FAMILIES else algorithm


def library_io(robot, cs, algorithm, osim):
    """([input specs], [output specs]) of the library: shapes with "m" where a mode's size is its
    active rows; K inputs, one per runtime-input constraint of the full set, record its bit."""
    kind = kind_of(algorithm)
    if osim and kind != "delassus":
        raise DelassusError(f"osim needs a Delassus library (Λ from Λ⁻¹), not the {kind} algorithm {algorithm!r}")
    algo = None if algorithm == AUTO else get_algorithm(prototype(algorithm))
    sizes = {"nv": robot.nv, "m": "m"}
    inputs = [{"name": "q", "shape": [robot.nq], "meaning": "configuration, Pinocchio layout"}]
    inputs += [{"name": n, "shape": [sizes[VECTOR_INPUTS[n][0]]], "meaning": algo.input_meaning(n)}
               for n in (algo.inputs if algo else ())]
    bits = {id(c): i for i, c in enumerate(cs.constraints)}
    inputs += [{"name": c.input_name, "shape": [c.rows, 6], "constraint": bits[id(c)],
                "meaning": f"K of constraint {c.spec} (read only when it is active)"} for c in cs.inputs]
    names = ["delassus", *(["osim"] if osim else [])] if kind == "delassus" else list(algo.outputs)
    outputs = []
    for n in names:
        if n not in OUTPUT_SHAPES:
            raise DelassusError(f"output {n!r} of {algorithm!r} has no shape rule for a library")
        meaning = (algo.outputs.get(n) if algo else None) or OUTPUT_MEANINGS[n]
        outputs.append({"name": n, "shape": [robot.nv if d == "nv" else d for d in OUTPUT_SHAPES[n]],
                        "meaning": meaning.replace("(m x m)", "(m x m, m the active rows)")})
    return inputs, outputs


def output_map(library_outputs, function_outputs):
    """For each library output, the name of the mode function's output that holds it: the same
    name, else (same number of outputs: an auto family's other member) the one at its position,
    else None (not computed in this mode: empty, or EMPTY_VALUES)."""
    names = [o["name"] for o in function_outputs]
    same_arity = len(names) == len(library_outputs)
    return [o["name"] if o["name"] in names else names[i] if same_arity else None
            for i, o in enumerate(library_outputs)]


@dataclass
class Mode:
    mask: int
    name: str                 # m5
    specs: list               # the active constraints, in the order given
    m: int                    # their rows
    algorithm: str | None     # what its function is generated with; None: nothing to compute
    scenario: str             # its function's scenario (manifest "scenario")
    folder: Path
    function: str | None      # C name
    key: str | None           # cache key (codegen/build.py content_hash)
    inputs: list              # library input name of each function input, in the function's order

    @property
    def stem(self):
        return self.algorithm

    @property
    def manifest_path(self):
        return self.folder / f"{self.algorithm}.json" if self.algorithm else None

    @property
    def label(self):
        return f"mode {self.name} ({', '.join(self.specs) or 'no constraints'})"


def library_name(model, scenario, algorithm, osim):
    """The C prefix of the dispatcher: cd_<model>_<scenario>_<algorithm>[_OSIM]_modes."""
    return artifact.function_name(model, scenario, algorithm, osim=osim) + LIBRARY_SUFFIX


def library_folder(out_dir, model, scenario, algorithm, osim):
    """``<out>/<model>/<scenario>/modes-<algorithm>[-osim]``: beside the scenario's functions."""
    return artifact.folder(out_dir, model, scenario) / f"modes-{artifact.stem(algorithm, osim)}"


def plan_modes(robot, cs, scenario, model, algorithm, osim, masks, folder, cflags, cc, cse, library_inputs):
    """The Mode of each mask, with its cache key (``cc``: the resolved compiler command)."""
    kind = kind_of(algorithm)
    k_inputs = {i["constraint"]: i["name"] for i in library_inputs if "constraint" in i}
    vectors = [i["name"] for i in library_inputs[1:] if "constraint" not in i]
    modes = []
    for mask in masks:
        name = mode_name(mask, len(cs.specs))
        specs = active(mask, cs.specs)
        algo = algorithm if specs else EMPTY_MODE_ALGORITHM if kind == "dynamics" else None
        sub = ConstraintSet.parse_or_empty(robot, specs)
        bits = [i for i in range(len(cs.specs)) if mask >> i & 1]
        # the full set is the scenario's own function (generate's: a library after generate, or
        # generate after a library, builds it once); the other modes live in the library folder
        full = bool(specs) and len(bits) == len(cs.specs)
        scen = scenario if full else f"{ident_part(scenario)}_{name}"
        function = key = None
        inputs = []
        if algo:
            function = artifact.function_name(model, scen, algo, osim=osim)
            key = content_hash(robot, sub, algo, cflags, cse, cc, osim, function)
            algo_inputs = get_algorithm(prototype(algo)).inputs if algo != AUTO else ()
            inputs = ["q", *[v for v in vectors if v in algo_inputs]]
            inputs += [k_inputs[bits[j]] for j, c in enumerate(sub.constraints) if c.is_input]
        modes.append(Mode(mask, name, specs, sub.m, algo, scen, Path(folder).parent if full else Path(folder) / name,
                          function, key, inputs))
    return modes
