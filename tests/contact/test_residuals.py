"""contact/residuals.py: the three residuals of a contact answer (with De Saxcé's correction, contact/cones.py), and
the dual one's approach speed, which a huge μ would otherwise hide."""
import numpy as np
import pytest

from casadi_delassus.contact import SOLVERS, Options
from casadi_delassus.contact.cones import de_saxce
from casadi_delassus.contact.residuals import residuals

from .conftest import approach


def test_de_saxce_and_residuals_of_a_sliding_contact():
    mu = np.array([0.5])
    sigma = np.array([0.3, -0.4, 0.0])                     # slides at 0.5 m/s, no normal velocity
    lam = np.array([-0.3, 0.4, 2.0]) * np.array([0.5 * 2 / 0.5, 0.5 * 2 / 0.5, 1])   # λ_t = −μ λ_n σ_t/|σ_t|
    assert np.allclose(de_saxce(sigma, mu), [0, 0, 0.25])
    r = residuals(lam, sigma, mu)
    assert r.max() < 1e-15
    assert residuals(lam, sigma, mu, exact=False).dual > 0.1   # the relaxation would lift the contact


@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("mu, tol", [(1e4, 1e-4), (1e6, 1e-6), (1e10, 1e-10)])
def test_a_large_mu_lets_no_sinking_foot_pass(problems, solver, mu, tol):
    """Issue 31, point 2: on go1_stand (feet closing at 0.18-0.25 m/s, sliding at ~0.1) λ = 0 passed the dual test at
    iteration 0 under μ = tol⁻¹, since Γ lifts σ_n by μ‖σ_t‖.  An answer called converged closes no contact faster
    than tol; λ = 0 is not one."""
    p = problems["go1_stand"]
    mus = np.full(len(p.mu), mu)
    assert approach(p.g) > 0.17 and residuals(np.zeros_like(p.g), p.g, mus).dual >= approach(p.g)
    r = SOLVERS[solver](p.G, p.g, mus, options=Options(tol=tol, max_iter=5000))
    assert r.status in ("converged", "max iterations", "NaN")
    if r.converged:
        assert approach(r.sigma) <= tol and np.max(np.abs(r.lam)) > 0
        assert np.allclose(r.sigma, p.G @ r.lam + p.g, rtol=0, atol=1e-12)
