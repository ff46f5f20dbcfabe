"""The Python entry points: resolve a robot and its constraints, generate, compile, load."""
from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import casadi as ca
import numpy as np

from .runtime import artifact
from .codegen.build import DEFAULT_CFLAGS, build
from .runtime.loader import StagedFunction, load
from .codegen.derivatives import tangent_function
from .codegen.target import TARGETS, resolve as resolve_target  # noqa: F401 (TARGETS: the CLI's choices)
from .codegen.staging import build_stages
from .codegen.trace import choose_cheapest, trace
from .constraints import ConstraintSet, ConstraintsLike, spec_list
from .errors import ArtifactError, ConstraintError, DelassusError, InputError, unknown_name
from .model import Robot, RobotLike, load_robot
from .names import shown
from .progress import silenced
from .registry import AUTO, is_auto
from .verify import precision as precision_check, workflow

if TYPE_CHECKING:
    from .runtime.cuda import CudaFunction
    from .runtime.loader import CompiledFunction
    from .verify.check import Outcome

DEFAULT_OUT: Path = Path("codegen_out")
# What generate returns: a compiled function, its stages, or (target "cuda") its CUDA form(s); what check takes
Checked: TypeAlias = "CompiledFunction | StagedFunction | CudaFunction"
Generated: TypeAlias = "Checked | list[CudaFunction]"


def constraint_set(robot: Robot, constraints: ConstraintsLike, name: str | None = None) -> tuple[ConstraintSet, str]:
    """(ConstraintSet, scenario name) from a scenario name, a list of specs, or a set.  A list
    or set is named ``custom_<hash of its specs>``, or "" when the user gave the model a ``name``
    (the name then covers the whole C prefix, codegen/artifact.py)."""
    if isinstance(constraints, ConstraintSet):
        return constraints, _custom_name(constraints.specs, name)
    if isinstance(constraints, str) and ":" not in constraints:
        scenarios = getattr(robot, "scenarios", {})
        if constraints not in scenarios:
            raise ConstraintError(unknown_name(f"scenario of robot {robot.name!r}", constraints, scenarios) +
                                  (f" (known: {', '.join(scenarios)})" if scenarios else
                                   " (this robot has no named scenarios: give constraints with -c LINK:6d)"))
        return ConstraintSet.parse(robot, scenarios[constraints]), constraints
    specs = spec_list(constraints)
    return ConstraintSet.parse(robot, specs), _custom_name(specs, name)


def _custom_name(specs, name):
    return "" if name is not None else "custom_" + hashlib.sha256("\n".join(specs).encode()).hexdigest()[:8]


def default_constraints(robot):
    scenarios = getattr(robot, "scenarios", {})
    if not scenarios:
        raise ConstraintError(f"robot {robot.name!r} has no named scenarios: give constraints (e.g. -c LINK:6d)")
    return next(iter(scenarios))


def generate(robot: RobotLike, constraints: ConstraintsLike | None = None, algorithm: str = AUTO,
             out_dir: str | os.PathLike[str] = DEFAULT_OUT, cflags: Sequence[str] = DEFAULT_CFLAGS, cc: str | None = None,
             cse: bool = True, force: bool = False, backend: str = "ctypes", osim: bool = False, stages: bool = False,
             name: str | None = None, floating_base: bool | None = None, derivative: str | None = None,
             wrt: str | Sequence[str] | None = None, method: str = "auto", casadi_derivatives: bool = False,
             target: str = "c", precision: str = "double", layout: str = "soa", nvcc: str = "auto",
             quiet: bool = False) -> Generated:
    """Trace, count, emit, compile and load ``algorithm`` (default ``auto``, as in the CLI: the
    cheapest Delassus algorithm, registry.AUTO_RULE) for ``robot`` (a Robot, or anything
    ``load_robot`` takes, with ``floating_base`` as there) and ``constraints`` (a scenario name, a list of specs, or a ConstraintSet; default: the
    robot's first scenario); ``osim=True`` adds Λ as a second output.  Returns a callable ``f(q, **K_inputs) -> numpy array`` with
    ``.op_count`` and ``.manifest``; code is cached under out_dir/<name>/<scenario>/, ``name``
    (letters and digits joined by single underscores) defaulting to the registry or synthetic
    robot's name, or a model file's stem plus a hash of its path (runtime/artifact.py).
    ``stages=True`` generates the algorithm's re-evaluation stages instead (codegen/staging.py:
    ``<algo>_factor``, [``_damping``,] ``_apply``) and returns a StagedFunction.
    ``derivative`` ("jvp", "vjp" or "jacobian") generates that derivative of the algorithm's
    function with respect to ``wrt`` (input names, default all; q in the tangent space) instead,
    ``method`` "auto" | "ad" | "analytic" (codegen/derivatives.py).  ``casadi_derivatives=True``
    compiles CasADi's derivative functions of the function into its .so (``<algo>-casadi``),
    so that ``f.casadi_function()`` (casadi.external) is differentiable inside CasADi.
    ``precision="single"`` computes in float32 (scalar and batch; inputs converted to float32,
    outputs float32) and stores its error against double, measured at build, in
    ``f.precision`` (docs/precision.md).
    ``target="cuda"`` also writes the CUDA form of each function (codegen/cuda.py, docs/gpu.md:
    ``precision`` "double" | "single", ``layout`` "soa" | "aos", built by ``nvcc`` where it is
    found) from the double C function, its reference, and returns a runtime.cuda.CudaFunction
    (with stages: one per stage, in order).  ``quiet=True``: no progress on stderr (progress.py)."""
    resolve_target(target, precision, layout)
    c_precision = "double" if target == "cuda" else precision
    robot = load_robot(robot, floating_base=floating_base)
    cs, scenario = constraint_set(robot, constraints if constraints is not None else default_constraints(robot), name)
    model = artifact.model_name(robot, name)
    folder = artifact.folder(out_dir, model, scenario)
    if stages and osim:
        raise DelassusError("stages and osim do not combine: stage an algorithm with vector inputs instead")
    if stages and is_auto(algorithm):
        raise DelassusError("stages need a named algorithm with stages (e.g. algorithm='damped_inverse_apply'), "
                            "not auto")
    if stages and derivative:
        raise DelassusError("stages and derivatives do not combine: generate the derivative as one function")

    def make(force):
        if stages:
            if c_precision != "double":
                raise DelassusError("stages are generated in double precision only")
            return StagedFunction(build_stages(robot, cs, algorithm, folder, scenario, cflags=tuple(cflags), cc=cc,
                                               cse=cse, force=force, model=model), backend=backend)
        return load(build(robot, cs, algorithm, folder, scenario, cflags=tuple(cflags), cc=cc, cse=cse, force=force,
                          osim=osim, model=model, derivative=derivative, wrt=wrt, method=method,
                          casadi_derivatives=casadi_derivatives, precision=c_precision,
                          measure=precision_check.measurer(robot, cs) if c_precision == "single" else None),
                    backend=backend)
    with silenced(quiet):
        try:
            f = make(force)
        except ArtifactError:       # intact files the .so contradicts (an edited, resealed manifest): rebuild
            f = make(True)
    f.robot, f.constraints = robot, cs
    if target == "cuda":
        return _cuda(f, precision, layout, nvcc, force)
    if precision == "single":       # what check_precision compares with
        f.double_twin = functools.partial(generate, robot, constraints, algorithm, out_dir=out_dir, cflags=cflags, cc=cc,
                                          cse=cse, backend=backend, osim=osim, name=name, derivative=derivative, wrt=wrt,
                                          method=method, casadi_derivatives=casadi_derivatives)
    return f


def _cuda(f, precision, layout, nvcc, force):
    """The CUDA forms of the C function(s) ``f`` (a StagedFunction: each stage's, in order)."""
    from .codegen.cuda import derive
    from .runtime.cuda import CudaFunction
    made = []
    for c in getattr(f, "stages", [f]):
        g = CudaFunction(derive(c.manifest_path, precision, layout, nvcc=nvcc, force=force))
        g.robot, g.constraints, g.c_function = f.robot, f.constraints, c       # c: its reference, on the CPU
        made.append(g)
    return made if hasattr(f, "stages") else made[0]


def links(robot: RobotLike, floating_base: bool | None = None) -> dict[str, Any]:
    """What ``casadi-delassus links`` prints, as plain data: the robot's joints in q order (type,
    nq, nv, q and v ranges, q entries) and its bodies, frames and sites (the names constraint
    specs take), for a Robot or anything ``load_robot`` takes."""
    from .model.links import describe_links
    return describe_links(load_robot(robot, floating_base=floating_base))


def check(f: Checked, oracles: str | Sequence[str] | None = None, samples: int = 100, tol: float | None = None,
          seed: int = 0, quiet: bool = False) -> dict[str, Outcome]:
    """{oracle: Outcome} for a generated function ``f`` (from ``generate``): each output's largest
    relative error against each oracle (verify/oracles.py: "numpy", "pinocchio"; default as
    ``casadi-delassus check``) over ``samples`` random inputs, the tolerance rule of
    verify/check.py (``Outcome.passed``), and ``Outcome.not_applicable`` for what an oracle
    could not compare: the outcomes of verify/workflow.py's rows, which ``check`` prints.  ``quiet=True``: no progress on stderr."""
    from .verify import oracles as registry
    from .verify.check import DEFAULT_TOL
    names = registry.oracle_names([oracles] if isinstance(oracles, str) else list(oracles or []), f.robot)
    tol = single_tolerance(f, DEFAULT_TOL) if tol is None else tol
    sessions = {n: registry.get_oracle(n).session(f.robot, f.constraints) for n in names}
    with silenced(quiet):
        return {row.oracle: row.outcome for row in workflow.oracle_rows(f, sessions, samples, tol, seed)}


single_tolerance = workflow.single_tolerance


def check_precision(f: CompiledFunction, samples: int = precision_check.SAMPLES, seed: int = 1) -> dict[str, Any]:
    """{"worst", "allowed", "passed", "samples"}: the single-precision function ``f`` (from
    ``generate(..., precision="single")``) against its double build (generated or taken from
    the cache) on ``samples`` fresh random inputs (``seed``; the build measured with
    verify/precision.BUILD_SEED): passed when its worst relative error stays within
    verify/precision.CHECK_FACTOR times the bound its manifest stores."""
    if not isinstance(getattr(f, "manifest", None), dict) or not hasattr(f, "precision"):
        raise InputError(f"check_precision checks a function from generate(..., precision='single'), got "
                         f"{type(f).__name__}")
    if isinstance(samples, (bool, np.bool_)) or not isinstance(samples, (int, np.integer)) or \
            not 1 <= samples <= precision_check.MAX_SAMPLES:
        raise InputError(f"samples: expected a whole number from 1 to {precision_check.MAX_SAMPLES}, got "
                         f"{shown(samples)}")
    if f.precision["type"] != "single":
        raise DelassusError(f"{f.manifest['function']} computes in double: check_precision checks single precision")
    if not hasattr(f, "double_twin"):
        raise DelassusError(f"{f.manifest['function']}: check_precision compares with the double build that "
                            f"generate(..., precision='single') knows how to make; generate it so to check it")
    return workflow.against_double(f, samples, seed)


def casadi_function(robot: RobotLike, constraints: ConstraintsLike | None = None, algorithm: str = AUTO,
                    tangent: bool = False, cse: bool = True, name: str | None = None) -> ca.Function:
    """``algorithm`` (default ``auto``) for ``robot`` and ``constraints`` (as in ``generate``) as a symbolic
    ``casadi.Function`` (SX, not compiled) with the generated function's named inputs (q,
    vectors, runtime K_<link>) and outputs, to call on MX in Opti or nlpsol and let CasADi
    differentiate it.  Its q derivative is then CasADi's, in the stored coordinates of q (a
    free joint's quaternion as four numbers); ``tangent=True`` takes (q, dq, …) and evaluates
    at q ⊕ dq (the model's integrate), so derivatives with respect to dq at dq = 0 are the
    tangent-space ones."""
    robot = load_robot(robot)
    cs, scenario = constraint_set(robot, constraints if constraints is not None else default_constraints(robot), name)
    if algorithm == AUTO:
        algorithm = choose_cheapest(robot, cs, cse=cse)[0]
    f = trace(robot, cs, algorithm, name=artifact.function_name(artifact.model_name(robot, name), scenario, algorithm),
              cse=cse)[0]
    return tangent_function(f, robot) if tangent else f


__all__ = ["generate", "load", "constraint_set", "default_constraints", "casadi_function", "StagedFunction", "links",
           "check", "check_precision"]
