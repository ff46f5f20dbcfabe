"""sweeps/elimination.py: the Householder reflection of Sec. VIII (eqs. 65-67) maps k̃ to
−cs e_1 with cs = copysign(‖k̃‖, k̃_1), numerically and on symbols (k̃_1 = 0 needs no
permutation, Remark 7), and a unit k̃ = ±e_r becomes a row swap that costs nothing."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.sweeps.elimination import householder, numeric_reflection, reflect

from conftest import evaluate


@pytest.mark.parametrize("k", [[3.0, -4.0, 12.0], [0.0, 2.0, -1.0], [-1.0, 0.5, 0.0]])
def test_symbolic_reflection_maps_k_to_a_multiple_of_e1(k):
    x, y = ca.SX.sym("x", 3), ca.SX.sym("y", 3)
    Q, cs, nrm2 = householder([x[i] for i in range(3)])
    Qx = ca.vertcat(*reflect(Q, [[x[i] for i in range(3)]])[0])
    Qy = ca.vertcat(*reflect(Q, [[y[i] for i in range(3)]])[0])
    yv = np.array([0.3, -0.2, 0.7])
    qx, c, n2, qy = evaluate([x, y], [Qx, cs, nrm2, Qy], [k, yv])
    norm = np.linalg.norm(k)
    c, n2 = c.item(), n2.item()
    assert c == pytest.approx(norm if k[0] >= 0 else -norm) and n2 == pytest.approx(norm ** 2)
    np.testing.assert_allclose(qx.ravel(), [-c, 0, 0], atol=1e-12)
    assert np.linalg.norm(qy) == pytest.approx(np.linalg.norm(yv))        # orthogonal


def test_numeric_reflection_and_its_row_swap():
    Q, cs = numeric_reflection(np.array([2.0, -1.0, 2.0]))
    np.testing.assert_allclose(Q @ [2.0, -1.0, 2.0], [-cs, 0, 0], atol=1e-15)
    np.testing.assert_allclose(Q @ Q.T, np.eye(3), atol=1e-15)
    Q, cs = numeric_reflection(np.array([0.0, 0.0, -1.0]))
    assert cs == 1.0 and set(np.unique(Q)) == {0.0, 1.0}                  # a permutation: no arithmetic
    np.testing.assert_array_equal(Q @ [0.0, 0.0, -1.0], [-1.0, 0, 0])
