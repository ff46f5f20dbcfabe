"""Trace an algorithm for one robot and constraint set into a casadi.Function."""
from __future__ import annotations

import time

import casadi as ca
import numpy as np

from ..progress import step
from . import trace_cache
from ..registry import AUTO, VECTOR_INPUTS, Algorithm, auto_candidates, cheapest_delassus, get_algorithm
from ..symbolic import linalg
from ..sweeps.tree import world_row_drift
from ..opcount import count_ops


# cse is one C++ call of ~15 µs per node of the expression graph (8 s for the 515k nodes of
# naive on chain:n=100), during which the progress timer cannot speak: graphs above this
# size (~5 s) are announced up front.
BIG_GRAPH = 300_000
COUPLED_Q = ("; without the coupled mimic joints' entries (Pinocchio's mimic=True model): "
             "each follows multiplier · q_ref + offset")
OSIM_MEANING = "operational-space inertia Λ = (Λ⁻¹)⁻¹ by an LDLᵀ of the Delassus matrix"


def entry(algorithm):
    """The registry's entry of ``algorithm``: a name, or the entry itself (looked up once by
    the caller and handed on)."""
    return algorithm if isinstance(algorithm, Algorithm) else get_algorithm(algorithm)


def traced_outputs(robot, constraints, algorithm, osim=False):
    """The algorithm (a name or its registry entry) over fresh symbols: ({input name: SX
    symbol}, in the generated function's order: q, vectors, runtime K), {output name: SX},
    and the K_i each constraint acts with.  ``osim`` adds Λ, the inverse of the Delassus
    matrix, through its LDLᵀ (PV paper Fig. 2 counts both).  The guard and the row shift
    around the algorithm's ``fn`` are here, once, for every caller; a robot with coupled mimic
    joints takes its coupled q, and the algorithm sees the full one."""
    algo = entry(algorithm)
    coupled = robot.coupling
    q = ca.SX.sym("q", robot.nq if coupled is None else coupled.nq)
    q_full = q if coupled is None else ca.mtimes(ca.sparsify(ca.DM(coupled.A)), q) + ca.DM(coupled.b)
    sizes = {"nv": robot.nv, "m": constraints.m}
    vectors = {n: ca.SX.sym(n, sizes[VECTOR_INPUTS[n][0]]) for n in algo.inputs}
    K_syms = {c.input_name: ca.SX.sym(c.input_name, c.rows, 6) for c in constraints.inputs}
    K_bodies = constraints.symbolic_K_bodies(q_full, K_syms)
    algo.require(robot, constraints)            # coupled mimic joints: naive only; A|B and JOINT:NAME: the loop algorithms
    given = dict(vectors)
    if "k" in given and constraints.world:      # world-aligned K_i(q) turn with the frame: the solvers
        given["k"] = given["k"] - world_row_drift(robot, constraints, q_full, given["v"])   # enforce K_i a_i = k_i − K̇_i v_i
    outputs = algo.fn(robot, constraints, q_full, K_bodies, **given)
    if osim and "osim" not in outputs and "delassus" in outputs:     # Λ only where Λ⁻¹ is an output
        m = constraints.m
        outputs["osim"] = linalg.to_sx(linalg.spd_inverse(linalg.upper_entries(outputs["delassus"]), m), m)
    return {"q": q, **vectors, **K_syms}, outputs, K_bodies


def describe_inputs(robot, constraints, algorithm):
    """The manifest's inputs of ``algorithm``'s (a name or its entry) generated function: name,
    shape, meaning."""
    algo = entry(algorithm)
    sizes = {"nv": robot.nv, "m": constraints.m}
    q_meaning = Q_MEANING.get(robot.q_convention, Q_MEANING["mixed"])
    if robot.coupling is None:
        inputs = [{"name": "q", "shape": [robot.nq], "meaning": q_meaning}]
    else:
        inputs = [{"name": "q", "shape": [robot.coupling.nq], "meaning": q_meaning + COUPLED_Q}]
    inputs += [{"name": n, "shape": [sizes[VECTOR_INPUTS[n][0]]], "meaning": algo.input_meaning(n)} for n in algo.inputs]
    inputs += [{"name": c.input_name, "shape": [c.rows, 6], "meaning": f"K of constraint {c.spec}: rows act on the "
                f"spatial acceleration [linear; angular] of {c.link} in its own frame"} for c in constraints.inputs]
    return inputs


def function_of(name, inputs, outputs, cse, what):
    """casadi.Function ``name`` of the SX ``inputs`` ({name: symbol}) to the densified
    ``outputs`` ({name: SX}), after cse when ``cse``."""
    exprs = [ca.densify(e) for e in outputs.values()]
    big = sum(ca.n_nodes(e) for e in exprs) > BIG_GRAPH          # one long C++ call each: say so first
    if cse:
        with step(f"common-subexpression elimination of {what}", now=big):
            exprs = ca.cse(exprs)
    with step(f"building the CasADi function of {what}", now=big):
        return ca.Function(name, list(inputs.values()), exprs, list(inputs), list(outputs))


def trace(robot, constraints, algorithm, name=None, cse=True, osim=False):
    """Returns (Function, description of inputs, description of outputs).  ``osim`` adds
    Λ, the inverse of the Delassus matrix, through its LDLᵀ (PV paper Fig. 2 counts both).
    ``algorithm``: a name or its registry entry."""
    algo = entry(algorithm)
    what = f"{algo.name}{' with Λ' if osim else ''} for {robot.name} (nv = {robot.nv}, m = {constraints.m})"
    cache_key = trace_cache.key(robot, constraints, algo.name, cse, osim)
    f = trace_cache.load(cache_key, name or algo.name)
    if f is None:           # not traced before (by another command: count, then generate)
        t0 = time.perf_counter()
        with step(f"tracing {what}"):
            symbols, outputs, _ = traced_outputs(robot, constraints, algo, osim)
        f = function_of(name or algo.name, symbols, outputs, cse, what)
        trace_cache.store(cache_key, f, time.perf_counter() - t0)
    outs = [{"name": n, "shape": [int(f.size1_out(k)), int(f.size2_out(k))],
             "meaning": algo.outputs.get(n, OSIM_MEANING if n == "osim" else n),
             "row_names": constraints.row_names if f.size1_out(k) == constraints.m else None}
            for k, n in enumerate(f.name_out())]
    return f, describe_inputs(robot, constraints, algo), outs


class TracedFunction:
    """``trace``'s function evaluated numerically, with the interface of a compiled one that verify/check.compare uses:
    ``inputs`` (their description) and ``outputs(q, **inputs)`` → {name: array}.  ``trace_options``: name, cse, osim."""

    def __init__(self, robot, constraints, algorithm, **trace_options):
        self.fn, self.inputs, _ = trace(robot, constraints, algorithm, **trace_options)

    def outputs(self, q, **inputs):
        return {k: np.array(v) for k, v in self.fn(q=q, **inputs).items()}


# the q input's meaning by Robot.q_convention (model/robot.py); v, τ and v̇ follow the same joints
Q_MEANING = {"pinocchio": "configuration, Pinocchio layout (see q_layout)",
             "mujoco": "configuration, MuJoCo qpos layout: quaternions w, x, y, z (see q_layout)",
             "mixed": "configuration, each joint's own layout (see q_layout: quaternion order per joint)"}


def choose_cheapest(robot, constraints, cse=True, osim=False, family=AUTO):
    """``-a auto`` (or an AUTO_FAMILIES entry ``family``): trace the candidates
    (registry.auto_candidates) and pick the one with the fewest instructions
    (registry.cheapest_delassus; one that refuses the constraints is skipped).
    Returns (name, {algorithm: instructions}, reason)."""
    return cheapest_traced(robot, constraints, cse, osim, family)[:3]


def cheapest_traced(robot, constraints, cse=True, osim=False, family=AUTO, name=None):
    """choose_cheapest's (name, counts, reason) and the winner's trace (Function named ``name``,
    inputs, outputs), the one traced to count it: the caller does not trace it again."""
    kept = {}

    def instructions(a):
        cache_key = trace_cache.key(robot, constraints, entry(a).name, cse, osim)
        n = trace_cache.load_count(cache_key)
        if n is None:
            traced = trace(robot, constraints, a, name=name, cse=cse, osim=osim)
            n = count_ops(traced[0])["instructions"]
            trace_cache.store_count(cache_key, n)
            if not kept or n < kept["n"]:         # the first of equal counts, as cheapest_delassus
                kept.update(n=n, algorithm=a, traced=traced)
        return n
    best, counts, refused = cheapest_delassus(robot, constraints, instructions, auto_candidates(robot, constraints, family),
                                              label="Delassus algorithm" if family == AUTO else family + " candidate")
    if kept.get("algorithm") != best:           # its count was kept from an earlier run: traced here alone
        kept["traced"] = trace(robot, constraints, best, name=name, cse=cse, osim=osim)
    others = ", ".join(f"{a} {n:,}" for a, n in sorted(counts.items(), key=lambda kv: kv[1]) if a != best)
    return best, counts, (f"fewest instructions for this robot and constraints: {best} {counts[best]:,}"
                          + (f" (then {others})" if others else "")
                          + (f"; refused: {', '.join(refused)}" if refused else "")), kept["traced"]
