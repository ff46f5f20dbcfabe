"""sweeps/tree.py on small trees against the NumPy reference: the first forward sweep and the
Newton-Euler passes (``inverse_dynamics``: M a + c), the orthonormalized constraint rows
(``RowFactor``) and the redundancy check at the probe (``check_regular``)."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.errors import ConstraintError
from casadi_delassus.sweeps.tree import RowFactor, Tree, check_regular, inverse_dynamics
from casadi_delassus.symbolic.probe import Probe
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_inverse_dynamics_matches_the_reference(name):
    robot, cs = case(name)
    q, v, a = ca.SX.sym("q", robot.nq), ca.SX.sym("v", robot.nv), ca.SX.sym("a", robot.nv)
    tau = ca.vertcat(*inverse_dynamics(Tree(robot, cs, q), v, a)[0])
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        expected = ref.inverse_dynamics(robot, *x)
        np.testing.assert_allclose(evaluate([q, v, a], [tau], x)[0].ravel(), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("K", [np.array([[1.0, 2, 0, 0, 0, 1], [0, 1, 1, 0, 3, 0], [2, 0, 0, 1, 0, 0]]), "symbolic"])
def test_row_factor_is_K_as_triangular_times_orthonormal(K):
    """K = T Q with Q Qᵀ = 1; ``solve`` is T⁻¹, ``back`` is T⁻ᵀ (numeric K by numpy, runtime K by
    Gram-Schmidt)."""
    Ks = ca.SX.sym("K", 3, 6) if isinstance(K, str) else ca.SX(K)
    k = ca.SX.sym("k", 3)
    fac = RowFactor.of(Ks)
    Kv = np.random.default_rng(6).normal(size=(3, 6)) if isinstance(K, str) else K
    kv = np.array([1.0, -2.0, 0.5])
    ins = [Ks, k] if isinstance(K, str) else [k]
    vals = [Kv, kv] if isinstance(K, str) else [kv]
    Q, x, y = evaluate(ins, [fac.Q, ca.vertcat(*fac.solve([k[r] for r in range(3)])),
                             ca.vertcat(*fac.back([k[r] for r in range(3)]))], vals)
    np.testing.assert_allclose(Q @ Q.T, np.eye(3), atol=1e-12)
    T = Kv @ Q.T                                   # lower triangular
    np.testing.assert_allclose(np.triu(T, 1), 0, atol=1e-12)
    np.testing.assert_allclose(x.ravel(), np.linalg.solve(T, kv), atol=1e-12)
    np.testing.assert_allclose(y.ravel(), np.linalg.solve(T.T, kv), atol=1e-12)


def test_orthonormal_rows_need_no_factor():
    assert RowFactor.of(ca.SX(np.eye(6)[:3])) is None


def test_check_regular_refuses_a_zero_pivot():
    robot, cs = case("chain3")
    q = ca.SX.sym("q", robot.nq)
    probe = Probe(robot, q, cs.K_body())
    check_regular(probe, [1 + q[0] ** 2, ca.cos(q[1]) ** 2 + 1], "pv", cs)
    with pytest.raises(ConstraintError, match="redundant or conflicting"):
        check_regular(probe, [1 + q[0] ** 2, ca.sin(q[1]) - ca.sin(q[1])], "pv", cs)
