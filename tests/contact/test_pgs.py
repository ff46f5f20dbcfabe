"""contact/pgs.py: the NumPy PGS against Pinocchio 4.1's PGSConstraintSolver on the issue's problems
(solver_checks.py).  Pinocchio's PGS solves the exact problem whatever solve_ncp says (its relaxed answer on go1_slide
is the exact one): the relaxation is compared with its ADMM only (test_admm.py)."""
import pytest

from .solver_checks import *  # noqa: F401,F403  (the checks both solvers pass, run here with PGS)


@pytest.fixture
def solver():
    return "pgs"
