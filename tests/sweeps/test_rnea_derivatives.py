"""sweeps/rnea_derivatives.py on small trees: the RNEA partials ∂τ/∂q (tangent columns), ∂τ/∂v
and M against CasADi's AD of tree.inverse_dynamics, whose values the NumPy reference checks
(tests/sweeps/test_tree.py), and M against the reference itself."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.model.integrate import tangent_map_sx
from casadi_delassus.sweeps.dynamics_derivatives import from_entries
from casadi_delassus.sweeps.rnea_derivatives import Partials
from casadi_delassus.sweeps.tree import Tree, inverse_dynamics
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_partials_match_ad_of_inverse_dynamics(name):
    robot, cs = case(name)
    n = robot.nv
    q, v, a = ca.SX.sym("q", robot.nq), ca.SX.sym("v", n), ca.SX.sym("a", n)
    d = Partials(Tree(robot, cs, q), v, a).dtau(("q", "v"))
    ours = [from_entries(d["q"], n, n), from_entries(d["v"], n, n), from_entries(d["M"], n, n, symmetric=True)]
    tau = ca.vertcat(*inverse_dynamics(Tree(robot, cs, q), v, a)[0])
    ad = [ca.mtimes(ca.jacobian(tau, q), tangent_map_sx(robot, q)), ca.jacobian(tau, v), ca.jacobian(tau, a)]
    rng = np.random.default_rng(9)
    x = robot.random_q(rng), rng.normal(size=n), rng.normal(size=n)
    values = evaluate([q, v, a], ours + ad, x)
    for mine, theirs in zip(values[:3], values[3:]):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-10 * max(1.0, np.abs(theirs).max()))
    np.testing.assert_allclose(values[2], ref.mass_matrix(robot, x[0]), rtol=0, atol=1e-12)
