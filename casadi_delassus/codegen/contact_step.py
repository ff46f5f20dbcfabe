"""C of the contact step (contact/step.py has its mathematics): for one robot and contact set, the Delassus
algorithm and ADMM's Delassus operator (contact/delassus_operator.py) chosen by instruction count, the SX parts
emitted by CasADi and the iteration loop of templates/contact_step.c.j2 around them, the operator's damped inverse
from templates/delassus_<route>.c.j2 (``<name>_step``, ``<name>_step_batch`` on runtime/pool.h's threads, and their
``_active`` forms taking the active-set mask), compiled once per hash of what determines the file (build_cached,
sealed: kind "step").  The
runtime loads it (runtime/contact_step.py); ``cd.contact_step`` is the entry (stepping/contact.py)."""
from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path

import casadi as ca

from ..contact import admm
from ..contact.result import STATUS_CODES, STEP_OPTIONS
from ..contact.delassus_operator import OPERATORS, DelassusOperator
from ..contact.step import post_function, prep_function, step_trace
from ..errors import InputError
from ..opcount import count_ops
from ..registry import AUTO, get_algorithm
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..runtime.door import POOL
from ..version import __version__
from . import schedule, sincos
from .build import auto_context, build_cached, resolve_cflags, source_hash
from .emit import TEMPLATES, casadi_source
from .escape import Safe
from .trace import choose_cheapest

# ADMM's Anderson acceleration (contact/admm.py), the C loop's constants
ANDERSON = {"after": admm.ANDERSON_AFTER, "memory": admm.ANDERSON_MEMORY, "safeguard": admm.ANDERSON_SAFEGUARD,
            "reg": admm.ANDERSON_REG}
DEFAULT_OUT = Path("codegen_out")
DEFAULT_CFLAGS = ("auto",)      # codegen/build.py resolve_cflags: level by size, math flags, the host CPU
# The solver loop runs its iterations in the same file as prep/post, so "auto" keeps -O2 up to this many prep+post
# instructions, where codegen/build.py's AUTO_LEVELS (sized for one evaluation per call) already give -O1.
STEP_O2_UP_TO = 40_000
# ADMM's linear solve (G + (ρ+η) I)⁻¹ b by a Delassus operator (contact/delassus_operator.py): "dense" (G's LDLᵀ)
# or "matrix_free" (damped_inverse_apply staged); "auto" takes the one whose work is fewer instructions.  The PGS
# loop reads G only.
LINEAR_SOLVES = ("auto", *OPERATORS)


class StepParts(typing.NamedTuple):
    """What the step's C is made of: its prep and post (contact/step.py), the Delassus algorithm's name and the
    Delassus operator (its factor, solve and C fragment)."""
    prep: ca.Function
    post: ca.Function
    delassus: str
    operator: DelassusOperator


def delassus_function(robot, cs, delassus):
    """(name, function) of the Delassus algorithm ``delassus`` (AUTO: the registry's cheapest for these contacts,
    choose_cheapest), the function as contact/step.py's step_trace takes it."""
    if delassus == AUTO:
        delassus = choose_cheapest(robot, cs)[0]
    return delassus, get_algorithm(delassus).fn


def linear_solve_costs(operators, preps):
    """{route: instructions of one step's linear solves} (DelassusOperator.work) of ``operators`` ({route:
    operator}) with their ``preps`` ({route: prep}); the dense operator's prep, which adds nothing, is the bare one."""
    n = lambda f: count_ops(f)["instructions"]     # noqa: E731
    return {route: op.work(n, preps[route], preps["dense"]) for route, op in operators.items()}


def step_parts(robot, cs, name, delassus, linear_solve):
    """The StepParts of the step, G by ``delassus`` (a registry name or AUTO), ADMM's linear solve by
    ``linear_solve`` ("dense", "matrix_free", or "auto": the fewer instructions, linear_solve_costs); prep has
    the chosen operator's outputs alone."""
    if linear_solve not in LINEAR_SOLVES:
        raise InputError(f"unknown linear_solve {linear_solve!r} (known: {', '.join(LINEAR_SOLVES)})")
    chosen, fn = delassus_function(robot, cs, delassus)
    trace = step_trace(robot, cs, fn)
    operators = {route: op(robot, cs, name) for route, op in OPERATORS.items() if linear_solve in ("auto", route)}
    preps = {route: prep_function(trace, name, op) for route, op in operators.items()}
    if linear_solve == "auto":
        costs = linear_solve_costs(operators, preps)
        linear_solve = min(costs, key=costs.get)        # a tie: the first, dense
    return StepParts(preps[linear_solve], post_function(trace, name), chosen, operators[linear_solve])


def render(robot, cs, name, parts, companions=(), precision="double"):
    """The step's C source from its StepParts, the operator's fragment (templates/delassus_<route>.c.j2) where its
    damped inverse goes; ``companions`` (casadi.Functions) are emitted with its own (the rollout's kinematics,
    codegen/contact_rollout.py), their sin/cos of the joint angles up front as prep's (codegen/sincos.py: the
    candidates' positions made 12 libm sincos calls a go1 step, 6 % of its time); CasADi's code in the C type of
    ``precision`` (the templates' own ``double`` stays: the rollout turns the whole file to float,
    codegen/precision.py hand_written_to_float)."""
    prep, op = parts.prep, parts.operator
    functions = (prep, parts.post, op.factor, op.solve, *companions)
    sizes = {k: max(int(getattr(f, k)()) for f in functions) for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}
    return TEMPLATES.get_template("contact_step.c.j2").render(
        fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__, delassus=parts.delassus,
        casadi_code=Safe(sincos.hoist(schedule.reorder(casadi_source(prep, functions[1:], precision)), TEMPLATES,
                                      precision, functions=len(functions) if companions else 1)[0]), nq=robot.nq, nv=robot.nv, m=cs.m, nc=cs.m // 3,
        nfac=int(op.factor.numel_out(0)), nw=int(prep.numel_out(3)), nwd=sum(int(prep.numel_out(k)) for k in op.stored),
        operator=op, anderson=ANDERSON, options=STEP_OPTIONS, statuses=STATUS_CODES, pool_code=Safe(POOL.read_text()), **sizes)


def build_key(robot, cs, cflags, cc, **extra):
    """The cache key of a compiled contact file: a hash of what determines it (the package's
    source and version, the robot, the contacts, the compiler and its flags, and ``extra``)."""
    return hashlib.sha256(json.dumps({"source": source_hash(), "robot": robot.describe(), "contacts": cs.describe(),
                                      "cflags": list(cflags), "cc": cc, "version": __version__, **extra},
                                     sort_keys=True).encode()).hexdigest()


def scenario_name(prefix, specs):
    """The folder of a contact set given as specs: ``prefix`` and a hash of the specs."""
    return f"{prefix}-" + hashlib.sha256("\n".join(specs).encode()).hexdigest()[:8]


def step_cflags(cflags, instructions, cc):
    """resolve_cflags's flags for the step's file, with -O1 raised to -O2 up to STEP_O2_UP_TO instructions."""
    flags = resolve_cflags(cflags, instructions, cc)
    return tuple("-O2" if f == "-O1" and instructions <= STEP_O2_UP_TO else f for f in flags)


def build(robot, cs, scenario, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, model=None,
          linear_solve="auto"):
    """Compile the step (cached by a hash of everything that determines it); returns its manifest's path (sealed:
    load it with runtime/contact_step.py).
    ``linear_solve``: ADMM's damped inverse, "dense", "matrix_free" or "auto" (step_parts)."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    name = artifact.function_name(model, scenario, "contact")
    auto = any(f.startswith("auto") for f in cflags)
    key = build_key(robot, cs, cflags, cc, delassus=delassus, host=auto_context() if auto else None,
                    linear_solve=linear_solve)

    def make():
        parts = step_parts(robot, cs, name, delassus, linear_solve)
        flags = step_cflags(cflags, sum(count_ops(f)["instructions"] for f in parts[:2]), cc) if auto else cflags
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": parts.delassus,
                    "linear_solve": parts.operator.route, "nq": robot.nq, "nv": robot.nv, "m": cs.m, "cflags": list(flags),
                    "version": __version__}
        return render(robot, cs, name, parts), [*flags, "-pthread"], manifest
    return build_cached(artifact.folder(out_dir, model, scenario), f"contact_{key[:16]}", make, cc, key, "step")
