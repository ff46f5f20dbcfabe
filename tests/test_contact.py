"""Frictional contact (casadi_delassus/contact/): cones, residuals, the NumPy ADMM and PGS
against Pinocchio 4.1's solvers on the issue's three problems."""
import numpy as np
import pytest

from casadi_delassus.contact import SOLVERS, Options
from casadi_delassus.contact.cones import de_saxce, dual_cone_distance, project_cone
from casadi_delassus.contact.residuals import residuals

pin = pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402

TOL = Options(tol=1e-10, max_iter=5000)


@pytest.fixture(scope="module")
def problems():
    return {n: cp.build(n) for n in cp.PROBLEMS}


def test_cone_projection_is_a_projection():
    rng = np.random.default_rng(0)
    x, mu = rng.normal(size=300), rng.uniform(0.05, 1.2, 100)
    p = project_cone(x, mu)
    b, pb = x.reshape(-1, 3), p.reshape(-1, 3)
    assert np.all(np.hypot(pb[:, 0], pb[:, 1]) <= mu * pb[:, 2] + 1e-12)          # in K_μ
    assert np.allclose(project_cone(p, mu), p)                                       # idempotent
    assert np.allclose(np.sum((b - pb) * pb, axis=1), 0, atol=1e-12)                 # x − Πx ⊥ Πx
    # Moreau: x = Π_K(x) − Π_K*(−x), and the two parts are orthogonal
    assert np.allclose(p - project_cone(-x, 1 / mu), x)
    assert np.all(dual_cone_distance(-(b - pb).reshape(-1), mu) < 1e-12)


def test_de_saxce_and_residuals_of_a_sliding_contact():
    mu = np.array([0.5])
    sigma = np.array([0.3, -0.4, 0.0])                     # slides at 0.5 m/s, no normal velocity
    lam = np.array([-0.3, 0.4, 2.0]) * np.array([0.5 * 2 / 0.5, 0.5 * 2 / 0.5, 1])   # λ_t = −μ λ_n σ_t/|σ_t|
    assert np.allclose(de_saxce(sigma, mu), [0, 0, 0.25])
    r = residuals(lam, sigma, mu)
    assert r.max() < 1e-15
    assert residuals(lam, sigma, mu, exact=False).dual > 0.1   # the relaxation would lift the contact


# Pinocchio 4.1's PGS solves the exact problem whatever solve_ncp says (its relaxed answer on
# go1_slide is the exact one): the relaxation is compared with its ADMM only
@pytest.mark.parametrize("solver, relaxed", [("admm", False), ("pgs", False), ("admm", True)])
@pytest.mark.parametrize("name", ["go1_stand", "go1_slide"])
def test_numpy_solvers_match_pinocchio_on_go1(problems, name, solver, relaxed):
    p = problems[name]
    r = SOLVERS[solver](p.G, p.g, p.mu, exact=not relaxed, options=TOL)
    assert r.converged and r.residuals.max() <= 1e-10
    ref = cp.pinocchio_solve(p, solver=solver, exact=not relaxed)[0]
    assert np.max(np.abs(r.lam - ref)) <= 1e-6 * np.max(np.abs(ref))


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_numpy_solvers_match_pinocchio_on_talos(problems, solver):
    """G has rank 12 of 24: λ is not unique, Jᵀλ and σ are."""
    p = problems["talos_stand"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    assert r.converged and r.residuals.max() <= 1e-10
    ref, ref_sigma, _, _ = cp.pinocchio_solve(p, solver=solver)
    assert np.max(np.abs(p.J.T @ (r.lam - ref))) <= 1e-6 * np.max(np.abs(p.J.T @ ref))
    assert np.max(np.abs(r.sigma - ref_sigma)) <= 1e-8


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_go1_stand_gives_the_balancing_impulses(problems, solver):
    p = problems["go1_stand"]
    r = SOLVERS[solver](p.G, p.g, p.mu, options=TOL)
    assert np.max(np.abs(r.lam - p.dt * p.f_eq)) <= 1e-6 * np.max(np.abs(p.dt * p.f_eq))
    assert np.allclose(p.f_eq.reshape(-1, 3)[:, 2], [26.84, 26.41, 37.85, 37.42], atol=5e-3)


@pytest.mark.parametrize("solver", ["admm", "pgs"])
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


def approach(sigma):
    """The fastest approach speed −σ_n of any contact (m/s; 0 when none closes): the test's own residual."""
    return max(0.0, -float(np.min(np.asarray(sigma)[2::3])))


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


@pytest.fixture(scope="module")
def topple():
    """Two steps of a toppling G1 (8 sole points, PD kp 100 kd 0.5: tests/data/g1_topple.npz says how they were cut):
    'edge', a toe edge whose corner sticks exactly at the cone's boundary with G singular along the edge, and 'lift',
    one sole corner sticking while three lift (where a first accelerated ADMM stalled)."""
    from pathlib import Path
    d = np.load(Path(__file__).parent / "data" / "g1_topple.npz")
    return {k: tuple(d[f"{k}_{x}"] for x in ("G", "g", "mu", "lam0")) for k in ("edge", "lift")}


def solution_error(G, g, mu, lam):
    """The test's own residual of λ for (G, g, μ): distance to the cone, of σ + Γ to the dual cone, complementarity
    and approach speed, largest."""
    sigma = G @ lam + g
    b, z = lam.reshape(-1, 3), sigma.reshape(-1, 3).copy()
    z[:, 2] += mu * np.hypot(z[:, 0], z[:, 1])
    primal = np.maximum(np.hypot(b[:, 0], b[:, 1]) - mu * b[:, 2], 0)
    dual = np.maximum(mu * np.hypot(z[:, 0], z[:, 1]) - z[:, 2], 0)
    return max(primal.max(), dual.max(), np.abs(np.sum(b * z, axis=1)).max(), approach(sigma))


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("case", ["edge", "lift"])
def test_a_toppling_humanoid_is_solved_within_the_default_budget(topple, case, warm):
    """Issue 31, point 18: plain ADMM needs 6,705 iterations on 'edge' (Pinocchio's ADMM 10,064), and the rollout
    stopped 'not converged' at the default 1,000; with Anderson acceleration after admm.ANDERSON_AFTER iterations
    the default solve gets through."""
    G, g, mu, lam0 = topple[case]
    r = SOLVERS["admm"](G, g, mu, lam0=lam0 if warm else None)
    assert r.converged and r.iterations <= 400, (r.status, r.iterations)
    assert solution_error(G, g, mu, r.lam) <= 1e-9
    if case == "edge":      # what the default budget gives without the acceleration, here and in Pinocchio
        from casadi_delassus.contact import admm
        plain = pytest.MonkeyPatch.context()
        with plain as m:
            m.setattr(admm, "ANDERSON_AFTER", 10 ** 9)
            assert not SOLVERS["admm"](G, g, mu, lam0=lam0 if warm else None).converged
        assert not cp.pinocchio_solve(G, g, mu, tol=1e-10, max_iter=1000)[3]
