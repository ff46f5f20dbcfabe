"""symbolic/scalar.py: structural zeros cost nothing (no SX node is made for them), and the
arithmetic that skips them computes the same values as NumPy."""
import casadi as ca
import numpy as np

from casadi_delassus.symbolic.scalar import (add, cross, dot, force_cross, is_zero, lin, mat_vec, motion_cross, mul,
                                             neg, sub)

from conftest import evaluate


def test_structural_zeros_make_no_nodes():
    x = ca.SX.sym("x")
    assert add(0.0, x) is x and sub(x, 0) is x and is_zero(mul(0.0, x)) and is_zero(neg(0.0))
    assert is_zero(ca.SX(0)) and not is_zero(x)
    assert is_zero(dot([0.0, x], [x, 0.0]))
    assert lin([(1.0, x), (0.0, x)]) is x


def test_values_match_numpy():
    a, b = ca.SX.sym("a", 6), ca.SX.sym("b", 6)
    A, B = [a[i] for i in range(6)], [b[i] for i in range(6)]
    W = np.arange(9.0).reshape(3, 3) - 4
    outs = [dot(A, B), ca.vertcat(*cross(A[:3], B[:3])), ca.vertcat(*motion_cross(A, B)),
            ca.vertcat(*force_cross(A, B)), ca.vertcat(*mat_vec(W, A[:3])), lin([(2.0, A[0]), (-3.0, A[1]), (1.0, A[2])])]
    rng = np.random.default_rng(17)
    av, bv = rng.normal(size=6), rng.normal(size=6)
    got = [x.ravel() for x in evaluate([a, b], outs, [av, bv])]
    w, v = av[:3], av[3:]
    np.testing.assert_allclose(got[0], av @ bv)
    np.testing.assert_allclose(got[1], np.cross(w, bv[:3]))
    np.testing.assert_allclose(got[2], np.concatenate([np.cross(w, bv[:3]), np.cross(w, bv[3:]) + np.cross(v, bv[:3])]))
    np.testing.assert_allclose(got[3], np.concatenate([np.cross(w, bv[:3]) + np.cross(v, bv[3:]), np.cross(w, bv[3:])]))
    np.testing.assert_allclose(got[4], W @ w)
    np.testing.assert_allclose(got[5], 2 * av[0] - 3 * av[1] + av[2])
