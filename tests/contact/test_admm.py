"""contact/admm.py: the NumPy ADMM against Pinocchio 4.1's ADMMConstraintSolver on the issue's problems
(solver_checks.py, and the convex relaxation on go1), and its Anderson acceleration on the saved steps of a toppling
G1 (tests/data/g1_topple.npz)."""
from pathlib import Path

import numpy as np
import pytest

from casadi_delassus.contact import SOLVERS

from .conftest import approach
from .solver_checks import *  # noqa: F401,F403  (the checks both solvers pass, run here with ADMM)
from .solver_checks import matches_pinocchio


@pytest.fixture
def solver():
    return "admm"


@pytest.mark.parametrize("name", ["go1_stand", "go1_slide"])
def test_the_relaxation_matches_pinocchios_admm_on_go1(problems, name):
    matches_pinocchio(problems[name], "admm", exact=False)


@pytest.fixture(scope="module")
def topple():
    """Two steps of a toppling G1 (8 sole points, PD kp 100 kd 0.5: tests/data/g1_topple.npz says how they were cut):
    'edge', a toe edge whose corner sticks exactly at the cone's boundary with G singular along the edge, and 'lift',
    one sole corner sticking while three lift (where a first accelerated ADMM stalled)."""
    d = np.load(Path(__file__).parent.parent / "data" / "g1_topple.npz")
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
    pytest.importorskip("pinocchio")
    from casadi_delassus.contact import admm
    from casadi_delassus.verify import contact_problems as cp
    G, g, mu, lam0 = topple[case]
    r = SOLVERS["admm"](G, g, mu, lam0=lam0 if warm else None)
    assert r.converged and r.iterations <= 400, (r.status, r.iterations)
    assert solution_error(G, g, mu, r.lam) <= 1e-9
    if case == "edge":      # what the default budget gives without the acceleration, here and in Pinocchio
        with pytest.MonkeyPatch.context() as m:
            m.setattr(admm, "ANDERSON_AFTER", 10 ** 9)
            assert not SOLVERS["admm"](G, g, mu, lam0=lam0 if warm else None).converged
        assert not cp.pinocchio_solve(G, g, mu, tol=1e-10, max_iter=1000)[3]
