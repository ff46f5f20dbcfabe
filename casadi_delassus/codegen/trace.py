"""Trace an algorithm for one robot and constraint set into a casadi.Function."""
from __future__ import annotations

import re

import casadi as ca

from ..registry import VECTOR_INPUTS, cheapest_delassus, get_algorithm
from ..symbolic import linalg
from ..opcount import count_ops


def c_identifier(*parts):
    return re.sub(r"\W", "_", "_".join(parts)).strip("_").lower()


OSIM_MEANING = "operational-space inertia Λ = (Λ⁻¹)⁻¹ by an LDLᵀ of the Delassus matrix"


def trace(robot, constraints, algorithm, name=None, cse=True, osim=False):
    """Returns (Function, description of inputs, description of outputs).  ``osim`` adds
    Λ, the inverse of the Delassus matrix, through its LDLᵀ (PV paper Fig. 2 counts both)."""
    algo = get_algorithm(algorithm)
    q = ca.SX.sym("q", robot.nq)
    sizes = {"nv": robot.nv, "m": constraints.m}
    vectors = {n: ca.SX.sym(n, sizes[VECTOR_INPUTS[n][0]]) for n in algo.inputs}
    K_syms = {c.input_name: ca.SX.sym(c.input_name, c.rows, 6) for c in constraints.inputs}
    K_bodies = [c.K_body(K_syms[c.input_name]) if c.is_input else c.K_body() for c in constraints.constraints]
    outputs = algo.fn(robot, constraints, q, K_bodies, **vectors)
    if osim and "osim" not in outputs and "delassus" in outputs:     # Λ only where Λ⁻¹ is an output
        m = constraints.m
        outputs["osim"] = linalg.to_sx(linalg.spd_inverse(linalg.upper_entries(outputs["delassus"]), m), m)
    names = list(outputs)
    exprs = [ca.densify(outputs[n]) for n in names]
    if cse:
        exprs = ca.cse(exprs)
    f = ca.Function(name or algorithm, [q, *vectors.values(), *K_syms.values()], exprs,
                    ["q", *vectors, *K_syms], names)
    inputs = [{"name": "q", "shape": [robot.nq], "meaning": "configuration, Pinocchio layout (see q_layout)"}]
    inputs += [{"name": n, "shape": [int(v.shape[0])], "meaning": algo.input_meaning(n)} for n, v in vectors.items()]
    inputs += [{"name": n, "shape": [c.rows, 6], "meaning": f"K of constraint {c.spec}: rows act on the "
                f"spatial acceleration [linear; angular] of {c.link} in its own frame"}
               for n, c in ((c.input_name, c) for c in constraints.inputs)]
    outs = [{"name": n, "shape": list(e.shape), "meaning": algo.outputs.get(n, OSIM_MEANING if n == "osim" else n),
             "row_names": constraints.row_names if e.shape[0] == constraints.m else None}
            for n, e in zip(names, exprs)]
    return f, inputs, outs


def choose_cheapest(robot, constraints, cse=True, osim=False):
    """``-a auto``: trace every Delassus algorithm and pick the one with the fewest
    instructions (registry.cheapest_delassus).  Returns (name, {algorithm: instructions}, reason)."""
    best, counts = cheapest_delassus(
        robot, constraints, lambda a: count_ops(trace(robot, constraints, a, cse=cse, osim=osim)[0])["instructions"])
    others = ", ".join(f"{a} {n:,}" for a, n in sorted(counts.items(), key=lambda kv: kv[1]) if a != best)
    return best, counts, f"fewest instructions for this robot and constraints: {best} {counts[best]:,} (then {others})"
