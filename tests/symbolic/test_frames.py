"""symbolic/frames.py on small trees against the NumPy reference's Plücker transforms:
``transform_motion`` is ^iX_λ(i) m, ``transform_force`` its transpose on forces and
``transform_rows`` K ^iX_λ(i), in every joint's local frame (coordinate axes, tilted axes,
prismatic, continuous and free joints)."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.symbolic.frames import local_transforms, transform_force, transform_motion, transform_rows
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_transforms_match_the_reference(name):
    robot, _ = case(name)
    q, m, f, K = ca.SX.sym("q", robot.nq), ca.SX.sym("m", 6), ca.SX.sym("f", 6), ca.SX.sym("K", 2, 6)
    T = local_transforms(robot, q)
    outs = []
    for t in T:
        outs += [ca.vertcat(*transform_motion(t, [m[j] for j in range(6)])),
                 ca.vertcat(*transform_force(t, [f[j] for j in range(6)])), transform_rows(t, K)]
    rng = np.random.default_rng(12)
    x = robot.random_q(rng), rng.normal(size=6), rng.normal(size=6), rng.normal(size=(2, 6))
    values = evaluate([q, m, f, K], outs, x)
    for i, X in enumerate(ref.parent_transforms(robot, x[0])):
        mv, fv, Kv = values[3 * i:3 * i + 3]
        np.testing.assert_allclose(mv.ravel(), X @ x[1], atol=1e-12)
        np.testing.assert_allclose(fv.ravel(), X.T @ x[2], atol=1e-12)
        np.testing.assert_allclose(Kv, x[3] @ X, atol=1e-12)
