"""symbolic/spatial.py: a symmetric matrix from its upper entries, and the compact Transform
(E, r) acting on motions, forces and rows as the Plücker matrix of the NumPy reference."""
import casadi as ca
import numpy as np

from casadi_delassus.symbolic.spatial import Transform, symmetric
from casadi_delassus.verify import reference as ref

from conftest import evaluate


def test_symmetric_mirrors_the_upper_entries():
    x = ca.SX.sym("x", 3)
    M = evaluate([x], [symmetric({(0, 0): x[0], (0, 2): x[1], (1, 1): x[2]}, 3)], [[1.0, 2.0, 3.0]])[0]
    np.testing.assert_array_equal(M, [[1, 0, 2], [0, 3, 0], [2, 0, 0]])


def test_transform_matches_plucker():
    rng = np.random.default_rng(18)
    E, r = np.linalg.qr(rng.normal(size=(3, 3)))[0], rng.normal(size=3)
    m, f = ca.SX.sym("m", 6), ca.SX.sym("f", 6)
    X = Transform(ca.SX(E), ca.SX(r))
    mv, fv = rng.normal(size=6), rng.normal(size=6)
    am, tf = evaluate([m, f], [X.apply_motion(m), X.transpose_force(f)], [mv, fv])
    P = ref.plucker(E, r)
    np.testing.assert_allclose(am.ravel(), P @ mv, atol=1e-12)
    np.testing.assert_allclose(tf.ravel(), P.T @ fv, atol=1e-12)
    inv = X.inverse()
    back = evaluate([m], [inv.apply_motion(X.apply_motion(m))], [mv])[0]
    np.testing.assert_allclose(back.ravel(), mv, atol=1e-12)
