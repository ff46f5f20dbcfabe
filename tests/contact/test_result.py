"""contact/result.py: the solver options (refused out of range), and the stopping test both solvers share (finish):
a warm start that already solves the problem stops at iteration 0, an iteration limit reports its status and
residuals."""
import pytest

from casadi_delassus.contact import SOLVERS, Options

from .conftest import TOL


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_warm_start_from_the_answer_stops_at_once(problems, solver):
    p = problems["go1_slide"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    again = SOLVERS[solver](p.G, p.g, p.mu, lam0=r.lam, options=TOL)
    assert again.converged and again.iterations == 0


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_iteration_limit_reports_status_and_residuals(problems, solver):
    p = problems["talos_stand"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=Options(tol=1e-14, max_iter=2))
    assert r.status == "max iterations" and r.iterations == 2 and r.residuals.max() > 1e-14


@pytest.mark.parametrize("change, words", [
    (dict(max_iter=2 ** 31), "max_iter"), (dict(max_iter=1e10), "max_iter"), (dict(max_iter=1e300), "max_iter"),
    (dict(max_iter=float("inf")), "max_iter"), (dict(max_iter=float("nan")), "max_iter"), (dict(max_iter=None), "max_iter"),
    (dict(max_iter=2.5), "max_iter"), (dict(max_iter=-1), "max_iter"), (dict(max_iter=True), "max_iter"),
    (dict(max_iter="10"), "max_iter"), (dict(tol=None), "tol"), (dict(tol="1e-8"), "tol"), (dict(tol=float("inf")), "tol"),
    (dict(tol=[1e-8]), "tol"), (dict(omega=None), "omega"), (dict(rho=float("nan")), "rho"),
])
def test_options_outside_their_range_are_refused(change, words):
    """Issue 31, points 1 and 16: a max_iter the compiled loops' C int cannot hold (result.MAX_ITER), or no number at
    all, is one InputError line before any solve (it was cast, overflowed, and left the status unwritten)."""
    from casadi_delassus.errors import InputError
    with pytest.raises(InputError, match=words) as e:
        Options(**change)
    assert "\n" not in str(e.value)
    assert Options(max_iter=2 ** 31 - 1).max_iter == 2 ** 31 - 1 and Options(max_iter=1e3).max_iter == 1000
