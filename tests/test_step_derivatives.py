"""Derivatives of the contact step (contact/step_derivatives.py) on go1: the implicit Jacobian
against central finite differences of the compiled step with every contact's mode fixed
(sticking, sliding, separating, and mixes), JVP against VJP by the dot-product test, and the
refusal at a mode boundary.  talos (non-unique λ) is bench/step_derivatives.py's."""
import dataclasses

import numpy as np
import pytest

from casadi_delassus.contact.step_derivatives import classify, mode_jacobians
from casadi_delassus.errors import InputError

pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402
from casadi_delassus.contact import derivative_check as check  # noqa: E402

H = 1e-5

# go1's derivative code is megabytes of C and takes minutes to build on two cores: `make test-all`
# (or `pytest -m slow tests/test_step_derivatives.py`) runs it, `make test` leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """One -O1 build of go1's step and derivatives, shared by every case (same contacts)."""
    return tmp_path_factory.mktemp("step_derivatives")


def _lifted(joint_velocity):
    """go1 standing with one FL joint moving: index 8 (calf) at −2 rad/s lifts the foot off
    (separating), index 7 (thigh) at 1 rad/s drags it (sliding); the other feet stick."""
    p = cp.build("go1_stand")
    v = p.v.copy()
    j, value = joint_velocity
    v[j] = value
    return dataclasses.replace(p, v=v, name=f"go1_stand_v{j}")


CASES = {"go1_stand": ("sticking",) * 4, "go1_slide": ("sliding",) * 4,
         (8, -2.0): ("separating", "sticking", "sticking", "sticking"),
         (7, 1.0): ("sliding", "sticking", "sticking", "sticking")}


@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_jacobian_equals_finite_differences_and_jvp_vjp_agree(out, case):
    problem = case if isinstance(case, str) else _lifted(case)
    errors, dot, modes = check.check(problem, out, H)
    assert modes == CASES[case]
    assert max(errors.values()) <= 1e-6, errors
    assert dot <= 1e-10


def test_a_wrong_mode_is_seen_by_the_finite_differences(out):
    """go1_slide differentiated as if its feet stuck: the check must fail (by far)."""
    p, step, deriv = check.build("go1_slide", out)
    fd, lam, _ = check.finite_differences(step, deriv, p, H)
    point = deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu)
    F_lam, F_sig = mode_jacobians(point.lam, point.sigma, p.mu, ("sticking",) * 4)
    V, S = (np.asarray(a) for a in deriv._f["jac"](*point.args))
    A = F_lam + F_sig @ (point.R @ np.asarray(deriv._f["parts"](*point.args)[3]) @ point.R.T)
    dlam = -np.linalg.solve(A, F_sig @ point.R @ S)
    errors = check.block_errors(np.vstack([V + point.W @ dlam, dlam]), fd, deriv.robot.nv)
    assert max(errors.values()) > 1e-2


def test_mode_boundaries_are_refused():
    lam, sigma, mu = np.zeros(3), np.zeros(3), np.array([0.8])
    with pytest.raises(InputError, match="grazing"):
        classify(lam, sigma, mu)
    with pytest.raises(InputError, match="cone's boundary"):
        classify([0.8, 0.0, 1.0], np.zeros(3), mu)
    assert classify([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], mu) == ("separating",)
    assert classify([-0.08, 0.0, 1.0], [0.5, 0.0, 0.0], mu) == ("sliding",)
