"""Trace an algorithm for one robot and constraint set into a casadi.Function."""
from __future__ import annotations

import casadi as ca

from ..algorithms import AUTO, VECTOR_INPUTS, delassus_algorithms, get_algorithm, linalg
from ..errors import ConstraintError
from ..progress import step
from .opcount import count_ops


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
    K_bodies = [c.K_body(K_syms[c.input_name]) if c.is_input else c.K_body() for c in constraints.constraints]
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
    inputs = [{"name": "q", "shape": [robot.nq], "meaning": "configuration, Pinocchio layout (see q_layout)"}]
    inputs += [{"name": n, "shape": [int(v.shape[0])], "meaning": algo.input_meaning(n)} for n, v in vectors.items()]
    inputs += [{"name": n, "shape": [c.rows, 6], "meaning": f"K of constraint {c.spec}: rows act on the "
                f"spatial acceleration [linear; angular] of {c.link} in its own frame"}
               for n, c in ((c.input_name, c) for c in constraints.inputs)]
    outs = [{"name": n, "shape": list(e.shape), "meaning": algo.outputs.get(n, OSIM_MEANING if n == "osim" else n),
             "row_names": constraints.row_names if e.shape[0] == constraints.m else None}
            for n, e in zip(names, exprs)]
    return f, inputs, outs


# ``auto`` traces the Delassus algorithms whose tracing time and size grow linearly with the
# number of bodies; naive (O(n³)) and ltl_osim (O(n d²)) only up to CHEAP_NV degrees of
# freedom (Talos, nv 50, traces all seven in seconds; naive on chain:n=300 ran over 9 minutes
# and 5 GB), or when none of the linear ones accepts the constraints (link-to-link rows).
LINEAR_TIME = ("pv_osim", "pv_osimr", "efpa", "kjr", "pv_osim_fast")
CHEAP_NV = 64
AUTO_RULE = (f"auto: the fewest instructions among {', '.join(LINEAR_TIME)} (linear in the number of bodies), "
             f"plus naive and ltl_osim when nv <= {CHEAP_NV} or no linear one accepts the constraints")


# ``auto`` among solvers with the same inputs and outputs (contact-mode libraries pick one
# per contact set, casadi_delassus/contact_modes/): the fewest instructions among these.
AUTO_FAMILIES = {
    "auto_hard": ("pv", "ltl"),                                   # hard constrained dynamics: v̇, λ
    "auto_soft": ("pv_soft", "ltl_soft"),                         # soft constrained dynamics: v̇, λ
    "auto_apply": ("delassus_apply", "delassus_explicit_apply"),  # Λ⁻¹λ
    "auto_damped": ("damped_inverse_apply", "damped_inverse_explicit"),   # (R⁻¹ + Λ⁻¹)⁻¹ a
}


def is_auto(algorithm):
    """``auto`` or one of AUTO_FAMILIES: an algorithm chosen per robot and constraint set."""
    return algorithm == AUTO or algorithm in AUTO_FAMILIES


def auto_candidates(robot, constraints, family=AUTO):
    """The algorithms ``auto`` (or the AUTO_FAMILIES entry ``family``) traces for this robot
    and constraint set (see AUTO_RULE)."""
    if family != AUTO:
        return [a for a in AUTO_FAMILIES[family] if get_algorithm(a).accepts(constraints)]
    accepted = [a for a in delassus_algorithms() if get_algorithm(a).accepts(constraints)]
    linear = [a for a in accepted if a in LINEAR_TIME]
    return accepted if robot.nv <= CHEAP_NV or not linear else linear


def choose_cheapest(robot, constraints, cse=True, osim=False, family=AUTO):
    """``-a auto`` (or an AUTO_FAMILIES entry): trace the candidates (``auto_candidates``) and
    pick the one with the fewest instructions; one that refuses the constraints
    (ConstraintError) is skipped.  Returns (name, {algorithm: instructions}, reason)."""
    counts, refused = {}, []
    for a in auto_candidates(robot, constraints, family):
        try:
            counts[a] = count_ops(trace(robot, constraints, a, cse=cse, osim=osim)[0])["instructions"]
        except ConstraintError:
            refused.append(a)
    if not counts:
        raise ConstraintError(f"no {'Delassus algorithm' if family == AUTO else family + ' candidate'} accepts the "
                              f"constraints {constraints.specs}"
                              f" (refused by {', '.join(refused)})")
    best = min(counts, key=counts.get)
    others = ", ".join(f"{a} {n:,}" for a, n in sorted(counts.items(), key=lambda kv: kv[1]) if a != best)
    return best, counts, (f"fewest instructions for this robot and constraints: {best} {counts[best]:,}"
                          + (f" (then {others})" if others else "")
                          + (f"; refused: {', '.join(refused)}" if refused else ""))
