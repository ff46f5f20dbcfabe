"""symbolic/linalg.py against NumPy on small random matrices: the one LDLᵀ and its solves and
inverse, the diagonal blocks of a sparse pattern, and the base's saddle-point elimination
(PV paper eqs. 45-47)."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.errors import ConstraintError
from casadi_delassus.symbolic import linalg

from conftest import evaluate


def spd(n, seed):
    A = np.random.default_rng(seed).normal(size=(n, n))
    return A @ A.T + n * np.eye(n)


def symbolic_upper(n, name="A"):
    """(SX symbol, its upper entries)."""
    A = ca.SX.sym(name, n, n)
    return A, {(i, j): A[i, j] for i in range(n) for j in range(i, n)}


def test_ldl_solve_inverse_and_spd_inverse():
    n = 5
    A, upper = symbolic_upper(n)
    b = ca.SX.sym("b", n)
    fac = linalg.ldl(upper, n)
    x = ca.vertcat(*linalg.ldl_solve(fac, [b[i] for i in range(n)]))
    inv = linalg.to_sx(linalg.ldl_inverse(fac[0], fac[2], n), n)
    inv2 = linalg.to_sx(linalg.spd_inverse(upper, n), n)
    Av, bv = spd(n, 13), np.arange(1.0, n + 1)
    xv, iv, iv2 = evaluate([A, b], [x, inv, inv2], [Av, bv])
    np.testing.assert_allclose(xv.ravel(), np.linalg.solve(Av, bv), rtol=1e-12)
    np.testing.assert_allclose(iv, np.linalg.inv(Av), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(iv2, np.linalg.inv(Av), rtol=1e-12, atol=1e-15)


def test_ldl_refuses_an_exactly_zero_pivot():
    with pytest.raises(ConstraintError, match="exactly zero"):
        linalg.ldl({(0, 0): 0.0, (1, 1): 1.0}, 2)


def test_blocks_of_finds_the_independent_blocks():
    upper = {(0, 0): 1, (1, 1): 1, (2, 2): 1, (3, 3): 1, (0, 2): 5, (1, 3): 0.0}
    assert linalg.blocks_of(upper, [0, 1, 2, 3]) == [[0, 2], [1], [3]]
    assert linalg.local(upper, [0, 2]) == {(0, 0): 1, (1, 1): 1, (0, 1): 5}


def test_saddle_solve_against_a_dense_solve():
    """[A, Kᵀ; K, −L] [a; λ] = [−p; −l] for a 6x6 A, three rows K in two blocks of L."""
    A, upper = symbolic_upper(6)
    K, p, l = ca.SX.sym("K", 3, 6), ca.SX.sym("p", 6), ca.SX.sym("l", 3)
    Lm, Lup = symbolic_upper(3, "L")
    L = {key: e for key, e in Lup.items() if key in ((0, 0), (1, 1), (2, 2), (0, 1))}   # blocks [0, 1], [2]
    a, lam, _ = linalg.saddle_solve(linalg.ldl(upper, 6), {r: [K[r, c] for c in range(6)] for r in range(3)}, L,
                                    [[2], [0, 1]], [p[x] for x in range(6)], {r: l[r] for r in range(3)})
    rng = np.random.default_rng(14)
    Lv = spd(3, 15)
    Lv[0, 2] = Lv[2, 0] = Lv[1, 2] = Lv[2, 1] = 0.0
    x = spd(6, 16), rng.normal(size=(3, 6)), rng.normal(size=6), Lv, rng.normal(size=3)
    av, lv = evaluate([A, K, p, Lm, l], [ca.vertcat(*a), ca.vertcat(*[lam[r] for r in range(3)])], x)
    Av, Kv, pv, _, lvec = x
    kkt = np.block([[Av, Kv.T], [Kv, -Lv]])
    expected = np.linalg.solve(kkt, -np.concatenate([pv, lvec]))
    np.testing.assert_allclose(np.concatenate([av.ravel(), lv.ravel()]), expected, rtol=1e-10, atol=1e-12)
