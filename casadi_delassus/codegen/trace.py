"""Trace an algorithm for one robot and constraint set into a casadi.Function."""
from __future__ import annotations

import casadi as ca

from ..progress import step
from ..registry import AUTO, VECTOR_INPUTS, auto_candidates, cheapest_delassus, get_algorithm
from ..symbolic import linalg
from ..opcount import count_ops


# cse is one C++ call of ~15 µs per node of the expression graph (8 s for the 515k nodes of
# naive on chain:n=100), during which the progress timer cannot speak: graphs above this
# size (~5 s) are announced up front.
BIG_GRAPH = 300_000
OSIM_MEANING = "operational-space inertia Λ = (Λ⁻¹)⁻¹ by an LDLᵀ of the Delassus matrix"


def trace(robot, constraints, algorithm, name=None, cse=True, osim=False):
    """Returns (Function, description of inputs, description of outputs).  ``osim`` adds
    Λ, the inverse of the Delassus matrix, through its LDLᵀ (PV paper Fig. 2 counts both)."""
    algo = get_algorithm(algorithm)
    what = f"{algorithm}{' with Λ' if osim else ''} for {robot.name} (nv = {robot.nv}, m = {constraints.m})"
    q = ca.SX.sym("q", robot.nq)
    sizes = {"nv": robot.nv, "m": constraints.m}
    vectors = {n: ca.SX.sym(n, sizes[VECTOR_INPUTS[n][0]]) for n in algo.inputs}
    K_syms = {c.input_name: ca.SX.sym(c.input_name, c.rows, 6) for c in constraints.inputs}
    K_bodies = constraints.symbolic_K_bodies(q, K_syms)
    with step(f"tracing {what}"):
        outputs = algo.fn(robot, constraints, q, K_bodies, **vectors)
        if osim and "osim" not in outputs and "delassus" in outputs:     # Λ only where Λ⁻¹ is an output
            m = constraints.m
            outputs["osim"] = linalg.to_sx(linalg.spd_inverse(linalg.upper_entries(outputs["delassus"]), m), m)
    names = list(outputs)
    exprs = [ca.densify(outputs[n]) for n in names]
    big = sum(ca.n_nodes(e) for e in exprs) > BIG_GRAPH          # one long C++ call each: say so first
    if cse:
        with step(f"common-subexpression elimination of {what}", now=big):
            exprs = ca.cse(exprs)
    with step(f"building the CasADi function of {what}", now=big):
        f = ca.Function(name or algorithm, [q, *vectors.values(), *K_syms.values()], exprs,
                        ["q", *vectors, *K_syms], names)
    inputs = [{"name": "q", "shape": [robot.nq], "meaning": Q_MEANING.get(robot.q_convention, Q_MEANING["mixed"])}]
    inputs += [{"name": n, "shape": [int(v.shape[0])], "meaning": algo.input_meaning(n)} for n, v in vectors.items()]
    inputs += [{"name": n, "shape": [c.rows, 6], "meaning": f"K of constraint {c.spec}: rows act on the "
                f"spatial acceleration [linear; angular] of {c.link} in its own frame"}
               for n, c in ((c.input_name, c) for c in constraints.inputs)]
    outs = [{"name": n, "shape": list(e.shape), "meaning": algo.outputs.get(n, OSIM_MEANING if n == "osim" else n),
             "row_names": constraints.row_names if e.shape[0] == constraints.m else None}
            for n, e in zip(names, exprs)]
    return f, inputs, outs


# the q input's meaning by Robot.q_convention (model/robot.py); v, τ and v̇ follow the same joints
Q_MEANING = {"pinocchio": "configuration, Pinocchio layout (see q_layout)",
             "mujoco": "configuration, MuJoCo qpos layout: quaternions w, x, y, z (see q_layout)",
             "mixed": "configuration, each joint's own layout (see q_layout: quaternion order per joint)"}


def choose_cheapest(robot, constraints, cse=True, osim=False, family=AUTO):
    """``-a auto`` (or an AUTO_FAMILIES entry ``family``): trace the candidates
    (registry.auto_candidates) and pick the one with the fewest instructions
    (registry.cheapest_delassus; one that refuses the constraints is skipped).
    Returns (name, {algorithm: instructions}, reason)."""
    best, counts, refused = cheapest_delassus(
        robot, constraints, lambda a: count_ops(trace(robot, constraints, a, cse=cse, osim=osim)[0])["instructions"],
        auto_candidates(robot, constraints, family),
        label="Delassus algorithm" if family == AUTO else family + " candidate")
    others = ", ".join(f"{a} {n:,}" for a, n in sorted(counts.items(), key=lambda kv: kv[1]) if a != best)
    return best, counts, (f"fewest instructions for this robot and constraints: {best} {counts[best]:,}"
                          + (f" (then {others})" if others else "")
                          + (f"; refused: {', '.join(refused)}" if refused else ""))
