"""``cd.contact_step`` and ``cd.ContactStep``: the compiled contact step for a robot and its point contacts
(contact/step.py has the mathematics, codegen/contact_step.py the C and its build, runtime/contact_step.py the
loading and the call)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from ..codegen.contact_step import DEFAULT_CFLAGS, DEFAULT_OUT, build, scenario_name
from ..contact.step import STEP_SOLVERS, auto_solver, check_contacts
from ..errors import InputError
from ..model import RobotLike, load_robot
from ..names import shown
from ..progress import silenced
from ..registry import AUTO
from ..runtime.contact_step import CompiledStep, check_mu


class ContactStep(CompiledStep):
    """A compiled contact step for one robot and contact set (``contact_step``): the arguments checked (solver,
    robot, contacts, μ) before anything is built, then built (cached) and loaded."""

    def __init__(self, robot, contacts, solver="auto", mu=0.8, relaxed=False, out_dir=DEFAULT_OUT,
                 cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, name=None, linear_solve="auto"):
        if not isinstance(solver, str) or solver not in STEP_SOLVERS:
            raise InputError(f"unknown contact solver {shown(solver)} (known: {', '.join(STEP_SOLVERS)})")
        robot = load_robot(robot)
        contacts = check_contacts(robot, contacts)
        mu = check_mu(mu, contacts.m // 3)
        path = build(robot, contacts, scenario_name("contact", contacts.specs), out_dir, tuple(cflags), cc, delassus,
                     name, linear_solve)
        # auto's PGS hands a solve it cannot finish to ADMM (fallback)
        super().__init__(path, robot, contacts, auto_solver(contacts) if solver == "auto" else solver, not relaxed,
                         solver == "auto", mu)


def contact_step(robot: RobotLike, contacts: str | Sequence[str], solver: str = "auto", mu: float | npt.ArrayLike = 0.8,
                 relaxed: bool = False, quiet: bool = False, **build_options: Any) -> ContactStep:
    """A compiled contact step ``s`` for ``robot`` (anything ``load_robot`` takes) and
    ``contacts`` (point candidates ``LINK[@x,y,z]``, contact/candidates.py, or a scenario name): ``s(q, v, tau, dt=1e-3, lam0=None,
    tol=Options.tol, max_iter=Options.max_iter)`` → StepResult (``.lam``, ``.sigma``, ``.v_next``,
    ``.iterations``, ``.residuals``, ``.status``); ``s(Q, V, TAU)`` steps a batch; ``s(..., active=mask)`` solves the
    flagged contacts alone (the others' λ exactly 0: the active-set mask simulation/ and the C rollout use).
    ``solver`` "auto" (the default: contact/step.py auto_solver), "admm" or "pgs"; ``relaxed=True`` solves the convex
    relaxation instead of the exact (De Saxcé) problem; ``build_options``: out_dir, cflags, cc, delassus, name, and
    linear_solve (ADMM's damped inverse: "auto", the default, "dense" or "matrix_free": codegen/contact_step.py
    LINEAR_SOLVES, step_parts; the manifest's ``linear_solve`` says which was built).  ``quiet=True``: no progress on
    stderr while it builds."""
    with silenced(quiet):
        return ContactStep(robot, contacts, solver, mu, relaxed, **build_options)
