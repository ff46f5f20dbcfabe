"""What the tests of the contact solvers share (test_admm, test_pgs, test_residuals, test_result): the issue's three
problems against Pinocchio 4.1 (verify/contact_problems.py), built once a session, and the test's own approach speed."""
import numpy as np
import pytest

from casadi_delassus.contact import Options

TOL = Options(tol=1e-10, max_iter=5000)


@pytest.fixture(scope="session")
def problems():
    pytest.importorskip("pinocchio")
    from casadi_delassus.verify import contact_problems as cp
    return {n: cp.build(n) for n in cp.PROBLEMS}


def approach(sigma):
    """The fastest approach speed −σ_n of any contact (m/s; 0 when none closes): the test's own residual."""
    return max(0.0, -float(np.min(np.asarray(sigma)[2::3])))
