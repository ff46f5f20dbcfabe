"""The checks both NumPy solvers pass (contact/admm.py, contact/pgs.py) against Pinocchio 4.1's solvers on the issue's
problems; test_admm.py and test_pgs.py each run them with their ``solver`` fixture."""
import numpy as np
import pytest

from casadi_delassus.contact import SOLVERS

from .conftest import TOL


def matches_pinocchio(p, solver, exact):
    """The solve of problem ``p`` converges and its λ is Pinocchio's (same solver, same problem) to 1e-6."""
    from casadi_delassus.verify import contact_problems as cp
    r = SOLVERS[solver](p.G, p.g, p.mu, exact=exact, options=TOL)
    assert r.converged and r.residuals.max() <= 1e-10
    ref = cp.pinocchio_solve(p, solver=solver, exact=exact)[0]
    assert np.max(np.abs(r.lam - ref)) <= 1e-6 * np.max(np.abs(ref))


@pytest.mark.parametrize("name", ["go1_stand", "go1_slide"])
def test_numpy_solvers_match_pinocchio_on_go1(problems, name, solver):
    matches_pinocchio(problems[name], solver, exact=True)


def test_numpy_solvers_match_pinocchio_on_talos(problems, solver):
    """G has rank 12 of 24: λ is not unique, Jᵀλ and σ are."""
    from casadi_delassus.verify import contact_problems as cp
    p = problems["talos_stand"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    assert r.converged and r.residuals.max() <= 1e-10
    ref, ref_sigma, _, _ = cp.pinocchio_solve(p, solver=solver)
    assert np.max(np.abs(p.J.T @ (r.lam - ref))) <= 1e-6 * np.max(np.abs(p.J.T @ ref))
    assert np.max(np.abs(r.sigma - ref_sigma)) <= 1e-8


def test_go1_stand_gives_the_balancing_impulses(problems, solver):
    p = problems["go1_stand"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    assert np.max(np.abs(r.lam - p.dt * p.f_eq)) <= 1e-6 * np.max(np.abs(p.dt * p.f_eq))
    assert np.allclose(p.f_eq.reshape(-1, 3)[:, 2], [26.84, 26.41, 37.85, 37.42], atol=5e-3)


def test_go1_slide_exact_versus_relaxed(problems, solver):
    p = problems["go1_slide"]
    exact = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    assert np.allclose(exact.lam[:3] / p.dt, [-2.806, 0.004, 28.057], atol=1e-3)
    assert np.max(np.abs(exact.sigma.reshape(-1, 3)[:, 2])) < 1e-8          # feet slide on the ground
    assert np.all(np.hypot(*exact.sigma.reshape(-1, 3)[:, :2].T) > 0.1)
    relaxed = SOLVERS[solver](p.G, p.g, p.mu, exact=False, options=TOL)
    assert relaxed.converged
    lift = relaxed.sigma.reshape(-1, 3)[:, 2]
    assert np.all(np.abs(lift - 0.05) < 5e-3)                                # the relaxation lifts the feet
    assert 1.27 < relaxed.lam[2] / exact.lam[2] < 1.29                      # FL's normal force 28 % larger
