"""Frictional contact on the robot's own Delassus matrix, as mathematics: cones and the De Saxcé map
(cones.py), the NCP residuals (residuals.py), ADMM (admm.py) and PGS (pgs.py) as NumPy
references, what a solve returns (result.py), the contact candidates (candidates.py), and the SX of the compiled
kinds: the step built on the Delassus family (step.py) with its Delassus operator, dense or matrix-free
(delassus_operator.py), the rollout's loop (rollout.py) and the step's derivatives
(step_derivatives.py).  No C and no loading here: their C is codegen/'s (contact_step.py, contact_rollout.py,
step_derivatives.py), their loading and call runtime/'s, their entry points stepping/'s
(tests/project/test_imports.py).  MuJoCo's soft contact model, built on the step and on admm.py, is MuJoCo's
model's (mujoco_model/soft_step.py, soft_contacts.py, soft_admm.py); nothing here imports it."""
import dataclasses

from .result import Options, Result
from . import admm, pgs

SOLVERS = {"admm": admm.solve, "pgs": pgs.solve}


def pgs_then_admm(G, g, mu, exact=True, lam0=None, options=Options()):
    """PGS, then ADMM from the same warm start where PGS does not converge: solver "auto"'s solve where it picks PGS
    (PGS crawls on some sets a toppling humanoid meets, which ADMM finishes: docs/contact.md); the iterations count
    both solvers'.  codegen/templates/contact_step.c.j2 (solve_contacts) does the same in C."""
    first = pgs.solve(G, g, mu, exact, lam0, options)
    if first.converged:
        return first
    second = admm.solve(G, g, mu, exact, lam0, options)
    return dataclasses.replace(second, iterations=first.iterations + second.iterations)


__all__ = ["Options", "Result", "SOLVERS", "admm", "pgs", "pgs_then_admm"]
