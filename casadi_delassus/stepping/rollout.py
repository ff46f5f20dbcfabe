"""The C rollout for a linear feedback that simulation/ runs (``CompiledRollout``): the contact candidates checked,
the rollout built (codegen/contact_rollout.py; its mathematics: contact/rollout.py) and loaded
(runtime/contact_rollout.py)."""
from __future__ import annotations

from ..codegen.contact_rollout import build
from ..codegen.contact_step import DEFAULT_CFLAGS, DEFAULT_OUT
from ..contact.step import STEP_SOLVERS, check_contacts
from ..contact.result import Options
from ..errors import InputError
from ..registry import AUTO
from ..runtime.contact_rollout import LoadedRollout, rollout_options


class CompiledRollout(LoadedRollout):
    """The compiled rollout of ``robot`` with contact candidates ``specs`` (world-aligned point constraints, the
    friction points, simulate.Scene.specs) at world positions ``positions`` (casadi.Function q → 3 x k: points or
    sphere centres), solved by ``solver`` ("admm", "pgs" or "auto": per active set) to ``tol`` (the convex relaxation
    when ``relaxed``), ADMM's linear solve by ``linear_solve`` ("dense", the default, "matrix_free" or "auto": as the
    step's build, codegen/contact_step.py step_parts); ``lanes`` (issue 33) 1: one environment per thread, "auto":
    SIMD lane groups of the CPU's vector width (or a power of two: that many lanes; the dense linear solve only),
    codegen/contact_rollout.py."""

    def __init__(self, robot, specs, positions, solver="admm", tol=Options.tol, max_iter=Options.max_iter, out_dir=DEFAULT_OUT,
                 cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, name=None, lanes=1, linear_solve="dense", relaxed=False):
        if solver not in STEP_SOLVERS:
            raise InputError(f"unknown contact solver {solver!r} (known: {', '.join(STEP_SOLVERS)})")
        contacts = check_contacts(robot, specs)
        rollout_options(solver, tol, max_iter, relaxed)          # the solver settings checked before anything is built
        super().__init__(build(robot, contacts, positions, out_dir, tuple(cflags), cc, delassus, name, lanes, linear_solve),
                         robot, contacts, solver, tol, max_iter, relaxed)
