"""C of the whole rollout (issue 27; contact/rollout.py has its mathematics): ``<name>_rollout`` runs steps of the
loop of simulation/simulate.py under a fixed linear feedback (simulation/feedback.py), and ``<name>_rollout_batch`` N
of them on the threads of runtime/pool.h: templates/contact_rollout.c.j2 around the contact step's C
(codegen/contact_step.py; ``keep_active`` masks the active set on either linear solve) and the loop's SX (integrate, the
candidates' positions, the free step), compiled once per hash of what determines it (build_cached, kind "rollout").
With ``lanes`` (issue 33), ``<name>_rollout_lanes_batch`` too: CD_BATCH_LANES environments per SIMD lane group, the
SX parts (prep, post, free step, integrate, positions) vectorised by codegen/vectorise.py so that one call computes
every lane, the solve (solve_prepared of contact_step.c.j2) lane by lane in scalar code, threads over lane groups.
runtime/contact_rollout.py loads and calls it; stepping/rollout.py is the entry simulation/ uses."""
from __future__ import annotations

import casadi as ca

from ..constraints import ConstraintSet
from ..errors import InputError
from ..contact.rollout import loop_functions
from ..opcount import count_ops
from ..registry import AUTO
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..version import __version__
from . import precision as fp, schedule, vectorise
from .build import auto_context, build_cached
from .contact_step import DEFAULT_CFLAGS, DEFAULT_OUT, build_key, render, scenario_name, step_cflags, step_parts
from .emit import TEMPLATES, casadi_source
from .escape import Safe
from .trace import trace


# the rollout's SX parts the lane groups run vectorised, in the order of lane_kernels's names
LANE_PARTS = ("prep", "post", "integrate", "positions", "free")


def lane_kernels(name, functions, precision="double"):
    """The vectorised C (vectorise.kernel_function) of ``functions`` (casadi.Functions, LANE_PARTS's order), each
    named ``<name>_<part>_lanes``, on vectors of the C type of ``precision``."""
    return "\n\n".join(vectorise.kernel_function(f"{name}_{part}_lanes", f,
                                                schedule.reorder(casadi_source(f, precision=precision)), precision)
                        for part, f in zip(LANE_PARTS, functions))


def lane_flags(lanes):
    """The C flags of a lane count, checked: 1 (no lane groups) and "auto" (the CPU's vector width: batch_vector.c.j2
    decides) none, else -DCD_BATCH_LANES=lanes (a power of two from 2 to 16)."""
    if lanes == "auto" or (lanes == 1 and type(lanes) is int):
        return ()
    if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes < 2 or lanes > 16 or lanes & (lanes - 1):
        raise InputError(f"lanes {lanes!r}: use 1, 'auto' (the CPU's vector width) or a power of two up to 16")
    return (f"-DCD_BATCH_LANES={lanes}",)


def build(robot, cs, positions, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, model=None,
          lanes=1, linear_solve="dense", precision="double", measure=None, measured_with=None):
    """Compile the rollout for the contacts ``cs`` and candidate positions ``positions`` (cached by a hash of what
    determines it); returns its manifest's path (sealed: runtime/contact_rollout.py loads it).  ``lanes`` other
    than 1 ("auto" or a power of two, lane_flags) adds the lane groups' entry point; ``linear_solve``: ADMM's damped
    inverse as the step's build takes it (contact_step.py step_parts; "dense", the rollout's default and the lanes'
    only one: their solve runs on each lane's explicit G).  ``precision="single"`` (issue 33) computes in float
    throughout (codegen/precision.py: CasADi's code and the templates' alike, -Werror=double-promotion; the lanes then
    twice as many), its files ``rollout-single_<hash>`` and C names ``…_SINGLE`` (runtime/artifact.py), and stores the
    error ``measure(manifest_path)`` returns (its states against the double rollout's, stepping/rollout.py) in the
    manifest's ``precision`` record; the solver settings it measures with, ``measured_with`` (a dict), enter its cache
    key, so that its record is theirs."""
    if fp.check(precision) == "single" and measure is None:
        raise InputError("a single-precision rollout measures its error against double at build: pass measure "
                         "(stepping/rollout.py CompiledRollout does)")
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    scenario = scenario_name("rollout", cs.specs)
    name = artifact.function_name(model, scenario, "rollout", precision=precision)
    auto = any(f.startswith("auto") for f in cflags)
    extra = lane_flags(lanes)
    if lanes != 1 and linear_solve != "dense":
        raise InputError(f"lanes={lanes!r} runs the dense linear solve only (each lane solves on its explicit G), "
                             f"not linear_solve={linear_solve!r}")
    q = ca.SX.sym("q", robot.nq)
    key = build_key(robot, cs, cflags, cc, delassus=delassus, host=auto_context() if auto else None,
                    rollout=str(ca.densify(positions(q))), lanes=lanes, linear_solve=linear_solve,
                    **({"precision": precision, "measured_with": measured_with} if precision != "double" else {}))

    def make():
        parts = step_parts(robot, cs, name, delassus, linear_solve)
        aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]
        loop = loop_functions(robot, positions, name, aba)
        flags = step_cflags(cflags, sum(count_ops(f)["instructions"] for f in (*parts[:2], *loop)), cc) if auto else cflags
        flags = (*flags, *extra, *(fp.SINGLE_FLAGS if precision == "single" else ()))
        text = TEMPLATES.get_template("contact_rollout.c.j2").render(
            fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__,
            step_code=Safe(render(robot, cs, name, parts, loop, precision)), lanes=lanes != 1,
            lane_code=Safe(lane_kernels(name, (parts.prep, parts.post, *loop), precision) if lanes != 1 else ""),
            **vectorise.vector_context(precision))
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": parts.delassus,
                    "linear_solve": parts.operator.route, "nq": robot.nq, "nv": robot.nv, "m": cs.m, "cflags": list(flags),
                    "lanes": lanes, "precision": {"type": precision}, "version": __version__}
        return fp.hand_written_to_float(text) if precision == "single" else text, [*flags, "-pthread"], manifest
    stem = "rollout" + (artifact.SINGLE_STEM if precision == "single" else "")
    return build_cached(artifact.folder(out_dir, model, scenario), f"{stem}_{key[:16]}", make, cc, key, "rollout",
                        measure=measure)
