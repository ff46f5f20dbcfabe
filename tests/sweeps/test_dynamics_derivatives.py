"""sweeps/dynamics_derivatives.py on small trees: the KKT residual vanishes at the NumPy
reference's constrained dynamics, the hard solvers' Jacobians match CasADi's AD of that solution
(through the residual, by the implicit-function theorem), and ``check_wrt`` names what it refuses."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.errors import DelassusError
from casadi_delassus.sweeps.dynamics_derivatives import check_wrt, constrained_dynamics_jacobians, kkt_residual
from casadi_delassus.sweeps.tree import Tree
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


def symbols(robot, cs):
    return (ca.SX.sym("q", robot.nq), ca.SX.sym("v", robot.nv), ca.SX.sym("tau", robot.nv), ca.SX.sym("k", cs.m),
            ca.SX.sym("vdot", robot.nv), ca.SX.sym("lam", cs.m))


def sample(robot, cs, seed):
    rng = np.random.default_rng(seed)
    q, v, tau, k = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=cs.m)
    vdot, lam = ref.constrained_dynamics(robot, cs, q, v, tau, k)
    return q, v, tau, k, vdot, lam


@pytest.mark.parametrize("name", SMALL_TREES)
def test_kkt_residual_vanishes_at_the_reference_solution(name):
    robot, cs = case(name)
    s = symbols(robot, cs)
    r = kkt_residual(Tree(robot, cs, s[0], cs.K_body()), *s[1:])
    x = sample(robot, cs, 10)
    assert np.abs(evaluate(s, [r], x)[0]).max() <= 1e-9 * max(1.0, np.abs(x[4]).max())
    moved = list(x)
    moved[5] = x[5] + 1e-3                                    # a wrong λ leaves a residual
    assert np.abs(evaluate(s, [r], moved)[0]).max() > 1e-5


@pytest.mark.parametrize("name", SMALL_TREES)
def test_hard_jacobians_by_the_implicit_function_theorem(name):
    """∂(v̇, λ)/∂(v, τ, k) = −KKT⁻¹ ∂r/∂x at the reference's solution (KKT = ∂r/∂(v̇, λ))."""
    robot, cs = case(name)
    q, v, tau, k, vdot, lam = s = symbols(robot, cs)
    tree = Tree(robot, cs, q, cs.K_body())
    tree.orthonormalize()
    wrt = ("v", "tau", "k")
    ours = constrained_dynamics_jacobians(tree, cs.K_body(), v, vdot, lam, wrt)
    r = kkt_residual(Tree(robot, cs, q, cs.K_body()), v, tau, k, vdot, lam)
    y, xs = ca.vertcat(vdot, lam), {"v": v, "tau": tau, "k": k}
    x = sample(robot, cs, 11)
    kkt = evaluate(s, [ca.jacobian(r, y)], x)[0]
    for w in wrt:
        expected = -np.linalg.solve(kkt, evaluate(s, [ca.jacobian(r, xs[w])], x)[0])
        got = np.vstack(evaluate(s, [ours[f"dvdot_d{w}"], ours[f"dlam_d{w}"]], x))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-8 * max(1.0, np.abs(expected).max()))


def test_check_wrt_names_what_it_cannot_differentiate_by():
    assert check_wrt("pv", ["q", "k"], ("q", "v", "tau", "k")) == ("q", "k")
    with pytest.raises(DelassusError, match="'R'"):
        check_wrt("pv", ("q", "R"), ("q", "v", "tau", "k"))
