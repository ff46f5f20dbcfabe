"""The C rollout for a linear feedback that simulation/ runs (``CompiledRollout``): the contact candidates checked,
the rollout built (codegen/contact_rollout.py; its mathematics: contact/rollout.py) and loaded
(runtime/contact_rollout.py).  In single precision (issue 33) the build measures its error against the same rollout in
double (``single_measurer``; verify/precision.py rollout_record) and stores it in its manifest."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..codegen.contact_rollout import build
from ..codegen.contact_step import DEFAULT_CFLAGS, DEFAULT_OUT
from ..codegen.precision import check as check_precision
from ..contact.step import STEP_SOLVERS, check_contacts
from ..contact.result import Options
from ..errors import InputError
from ..registry import AUTO
from ..runtime.contact_rollout import LoadedRollout, rollout_options
from ..verify.precision import ROLLOUT_STEPS, rollout_record


class CompiledRollout(LoadedRollout):
    """The compiled rollout of ``robot`` with contact candidates ``specs`` (world-aligned point constraints, the
    friction points, simulate.Scene.specs) at world positions ``positions`` (casadi.Function q → 3 x k: points or
    sphere centres), solved by ``solver`` ("admm", "pgs" or "auto": per active set) to ``tol`` (the convex relaxation
    when ``relaxed``), ADMM's linear solve by ``linear_solve`` ("dense", the default, "matrix_free" or "auto": as the
    step's build, codegen/contact_step.py step_parts); ``lanes`` (issue 33) 1: one environment per thread, "auto":
    SIMD lane groups of the CPU's vector width (or a power of two: that many lanes; the dense linear solve only),
    codegen/contact_rollout.py.  ``precision="single"`` computes in float32 (float32 records; tol and max_iter as
    runtime/contact_rollout.py single_options allows) and needs ``measured_on`` (a MeasuredOn: the environments the
    build measures its error on, single_measurer)."""

    def __init__(self, robot, specs, positions, solver="admm", tol=Options.tol, max_iter=Options.max_iter, out_dir=DEFAULT_OUT,
                 cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, name=None, lanes=1, linear_solve="dense", relaxed=False,
                 precision="double", measured_on=None):
        if solver not in STEP_SOLVERS:
            raise InputError(f"unknown contact solver {solver!r} (known: {', '.join(STEP_SOLVERS)})")
        if check_precision(precision) == "single" and measured_on is None:
            raise InputError("precision='single' measures its error against double at build: pass measured_on "
                             "(the environments it runs, CompiledRollout's docstring)")
        contacts = check_contacts(robot, specs)
        rollout_options(solver, tol, max_iter, relaxed, precision)      # the solver settings checked before any build
        twin = dict(robot=robot, specs=specs, positions=positions, solver=solver, tol=tol, max_iter=max_iter,
                    out_dir=out_dir, cflags=cflags, cc=cc, delassus=delassus, name=name, lanes=lanes,
                    linear_solve=linear_solve, relaxed=relaxed)
        measure = single_measurer(twin, contacts, measured_on) if precision == "single" else None
        settings = {"solver": solver, "tol": float(tol), "max_iter": int(max_iter), "relaxed": bool(relaxed)}
        super().__init__(build(robot, contacts, positions, out_dir, tuple(cflags), cc, delassus, name, lanes, linear_solve,
                               precision, measure, settings), robot, contacts, solver, tol, max_iter, relaxed)


def single_measurer(twin, contacts, measured_on):
    """``measure(manifest_path)`` for the single-precision build (codegen/contact_rollout.py): the rollout at
    ``manifest_path`` and its double twin (CompiledRollout of the keywords ``twin``: the same build in double, cached)
    run ``measured_on`` on their scalar entry points; returns verify/precision.py rollout_record of the two."""
    def measure(manifest_path):
        single = LoadedRollout(manifest_path, twin["robot"], contacts, twin["solver"], twin["tol"], twin["max_iter"],
                               twin["relaxed"])
        double = CompiledRollout(**twin)
        return rollout_record(measured_on(double), measured_on(single), measured_on.steps, measured_on.dt) | {
            "solver": twin["solver"], "tol": float(twin["tol"])}
    return measure


@dataclass(frozen=True)
class MeasuredOn:
    """What a single-precision build measures its error on (CompiledRollout's ``measured_on``): ``run(rollout)`` →
    the RawRollouts of ``steps`` steps of ``dt`` of a few environments (simulation/simulate.py: the first
    ROLLOUT_ENVIRONMENTS of the call that builds it, ROLLOUT_STEPS steps)."""
    run: Callable
    steps: int = ROLLOUT_STEPS
    dt: float = 1e-3

    def __call__(self, rollout):
        return self.run(rollout)
