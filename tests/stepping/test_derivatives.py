"""Derivatives of the contact step (contact/step_derivatives.py): the Jacobian assembled from
the compiled forward mode against central finite differences of the compiled step with every
contact's mode fixed (go1 sticking, sliding, separating and mixes; talos standing, whose λ is
not unique: v_next only), JVP against VJP by the dot-product test, the minimum-norm solve of
a singular implicit system, and the refusals (a mode boundary, unknown modes)."""
import dataclasses

import numpy as np
import pytest

from casadi_delassus.contact.step_derivatives import PseudoInverse, classify
from casadi_delassus.errors import DelassusError, InputError

from conftest import TEST_CFLAGS

pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402
from casadi_delassus.verify import step_derivative_check as check  # noqa: E402

H = 1e-5


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """One TEST_CFLAGS build of go1's step and derivatives, shared by every case (same contacts)."""
    return tmp_path_factory.mktemp("step_derivatives")


def _lifted(joint_velocity):
    """go1 standing with one FL joint moving: index 8 (calf) at −2 rad/s lifts the foot off
    (separating), index 7 (thigh) at 1 rad/s drags it (sliding); the other feet stick."""
    p = cp.build("go1_stand")
    v = p.v.copy()
    j, value = joint_velocity
    v[j] = value
    return dataclasses.replace(p, v=v, name=f"go1_stand_v{j}")


CASES = {"go1_stand": ("sticking",) * 4,
         "go1_slide": ("sliding",) * 4,
         (8, -2.0): ("separating", "sticking", "sticking", "sticking"),
         (7, 1.0): ("sliding", "sticking", "sticking", "sticking"),
         "talos_stand": ("sticking",) * 8}
SLOW = pytest.mark.slow     # each a compile or robot-scale repeat of what go1_stand checks fast


@pytest.mark.parametrize("case", [c if c == "go1_stand" else pytest.param(c, marks=SLOW) for c in CASES], ids=str)
def test_jacobian_equals_finite_differences_and_jvp_vjp_agree(out, case):
    problem = case if isinstance(case, str) else _lifted(case)
    errors, dot, modes = check.check(problem, out, H, TEST_CFLAGS)
    assert modes == CASES[case]
    # λ's blocks are compared exactly where λ is unique
    assert {o for o, _ in errors} == ({"v_next"} if case == "talos_stand" else {"v_next", "lam"})
    assert max(errors.values()) <= 1e-6, errors
    assert dot <= 1e-10


def test_a_non_unique_lambda_on_a_small_robot(tmp_path):
    """talos's case on go1: FL's foot twice, so G is singular and λ splits between the two
    (any split solves): v_next's derivative alone is checked, and is exact."""
    p = cp.build("go1_stand")
    p = dataclasses.replace(p, specs=p.specs + p.specs[:1], mu=np.full(5, p.mu[0]), name="go1_stand_twice")
    errors, dot, modes = check.check(p, tmp_path, H, TEST_CFLAGS)
    assert modes == ("sticking",) * 5
    assert {o for o, _ in errors} == {"v_next"}
    assert max(errors.values()) <= 1e-6, errors
    assert dot <= 1e-10


def test_a_singular_system_that_moves_v_next_is_refused(out):
    """G made singular along a direction M⁻¹Jᵀ does not annihilate: no derivative exists."""
    p, step, deriv = check.build("go1_stand", out, TEST_CFLAGS)
    lam = step(p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-12).lam
    parts = deriv._f["parts"]

    def singular(*args):
        v_next, sigma, W, G = (np.asarray(a) for a in parts(*args))
        U, s, Vt = np.linalg.svd(G)
        return v_next, sigma, W, G - s[-1] * np.outer(U[:, -1], Vt[-1])

    deriv._f = {**deriv._f, "parts": singular}
    with pytest.raises(DelassusError, match="singular"):
        deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu)


def test_no_dense_jacobian_is_compiled(out):
    """The compiled code stays a few times the step's size: a dense casadi.jacobian of go1's
    v_next and σ over (δq, v, τ) alone was 288k instructions (talos: out of gcc's memory)."""
    _, _, deriv = check.build("go1_stand", out, TEST_CFLAGS)
    assert set(deriv.manifest["instructions"]) == {"parts", "fwd", "adj"}
    assert max(deriv.manifest["instructions"].values()) < 40_000, deriv.manifest


def test_a_wrong_mode_is_seen_by_the_finite_differences(out):
    """go1_slide differentiated as if its feet stuck: the check must fail (by far)."""
    p, step, deriv = check.build("go1_slide", out, TEST_CFLAGS)
    fd, lam, _ = check.finite_differences(step, deriv, p, H)
    jac = deriv.jacobian(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu, modes=("sticking",) * 4)
    errors = check.block_errors(np.vstack([jac.dv_next, jac.dlam]), fd, deriv.robot.nv)
    assert max(errors.values()) > 1e-2
    with pytest.raises(InputError, match="modes"):
        deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu, modes=("flying",) * 4)
    stand = cp.build("go1_stand")
    with pytest.raises(InputError, match="does not slip"):
        deriv.point(stand.q, stand.v, stand.tau, stand.dt * stand.f_eq, dt=stand.dt, mu=stand.mu,
                    modes=("sliding",) * 4)


def test_the_singular_solve_is_the_minimum_norm_one_and_its_transpose_the_adjoint():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((12, 5))
    A = B @ rng.standard_normal((5, 12))            # rank 5
    inv, null = PseudoInverse.of(A)
    assert null.shape == (7, 12)
    b, c = A @ rng.standard_normal(12), rng.standard_normal((12, 3))
    assert np.allclose(inv.solve(b), np.linalg.lstsq(A, b, rcond=None)[0], rtol=0, atol=1e-12)
    assert np.allclose(A @ inv.solve(b), b, rtol=0, atol=1e-12)
    assert np.allclose(inv.solve(c).T @ b, c.T @ inv.solve(b, transpose=True), rtol=0, atol=1e-12)
    assert np.allclose(inv.solve(c)[:, 1], inv.solve(c[:, 1]), rtol=0, atol=1e-15)


def test_mode_boundaries_are_refused():
    lam, sigma, mu = np.zeros(3), np.zeros(3), np.array([0.8])
    with pytest.raises(InputError, match="grazing"):
        classify(lam, sigma, mu)
    with pytest.raises(InputError, match="cone's boundary"):
        classify([0.8, 0.0, 1.0], np.zeros(3), mu)
    assert classify([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], mu) == ("separating",)
    assert classify([-0.08, 0.0, 1.0], [0.5, 0.0, 0.0], mu) == ("sliding",)


def _bad_q(change):
    """go1_stand's q changed by ``change`` (a function of a copy)."""
    q = cp.build("go1_stand").q.copy()
    change(q)
    return q


@pytest.mark.parametrize("change, words", [
    (dict(dt=0.0), "dt"), (dict(dt=-1.0), "dt"), (dict(dt=float("nan")), "dt"), (dict(dt=[1e-3, 1e-3]), "dt"),
    (dict(mu=float("nan")), "mu"), (dict(mu=[0.8] * 3), "mu"),
    (dict(q=_bad_q(lambda q: q.__setitem__(7, np.nan))), "q"),
    (dict(q=_bad_q(lambda q: q.__setitem__(slice(3, 7), 0.0))), "quaternion"),
    (dict(q=_bad_q(lambda q: q.__setitem__(slice(3, 7), 2 * q[3:7]))), "quaternion"),
    (dict(lam=np.full(12, np.nan)), "lam"), (dict(lam=np.zeros(11)), "lam"), (dict(lam="x"), "lam"),
    (dict(lam=np.ones(12)), "not a solution"), (dict(lam=0.0), "lam"),
    (dict(normals=np.zeros((4, 3))), "normals"), (dict(tau=np.zeros(17)), "tau"),
])
def test_the_derivatives_check_what_the_step_checks(out, change, words):
    """Issue 31, point 11: dt 0, −1 or NaN, μ NaN, a NaN q, a zero quaternion, a NaN λ or one that solves nothing all
    returned matrices.  The derivatives share the step's checks (step.py) and refuse a λ whose residual exceeds
    step_derivatives.SOLUTION_TOL: one-line InputErrors."""
    p, step, deriv = check.build("go1_stand", out, TEST_CFLAGS)
    lam = step(p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-12).lam
    args = dict(q=p.q, v=p.v, tau=p.tau, lam=lam, dt=p.dt, mu=p.mu) | change
    with pytest.raises(InputError, match=words) as e:
        deriv.point(**args)
    assert "\n" not in str(e.value)


def test_jvp_and_vjp_check_their_vectors(out):
    """Issue 31, point 16: a tangent of the wrong length ended in numpy's or CasADi's traceback."""
    p, step, deriv = check.build("go1_stand", out, TEST_CFLAGS)
    point = deriv.point(p.q, p.v, p.tau, step(p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-12).lam, dt=p.dt, mu=p.mu)
    nv = deriv.robot.nv
    for bad in ([np.zeros(nv - 1), np.zeros(nv), np.zeros(nv)], [np.zeros(nv), np.full(nv, np.nan), np.zeros(nv)],
                [np.zeros(nv), np.zeros(nv), "tau"]):
        with pytest.raises(InputError) as e:
            deriv.jvp(point, *bad)
        assert "\n" not in str(e.value)
    for bad in ([np.zeros(nv + 1)], [np.zeros(nv), np.zeros(5)]):
        with pytest.raises(InputError):
            deriv.vjp(point, *bad)
    with pytest.raises(InputError, match="Point"):
        deriv.jvp("point", np.zeros(nv), np.zeros(nv), np.zeros(nv))
    assert deriv.jvp(point, np.zeros(nv), np.zeros(nv), np.ones(nv))[0].shape == (nv,)
