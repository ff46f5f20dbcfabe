"""sweeps/joint_space.py on small trees against the NumPy reference: the CRBA's M(q), the
constraint Jacobian J(q) and the sparse factor M = LᵀDL's solves."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.sweeps.joint_space import MassFactor, constraint_jacobian, mass_matrix
from casadi_delassus.symbolic import linalg
from casadi_delassus.symbolic.frames import local_transforms
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_mass_matrix_and_jacobian_match_the_reference(name):
    robot, cs = case(name)
    q = ca.SX.sym("q", robot.nq)
    T = local_transforms(robot, q)
    M = linalg.to_sx(mass_matrix(robot, T), robot.nv)
    J = constraint_jacobian(robot, cs, T, cs.K_body())
    rng = np.random.default_rng(0)
    for _ in range(3):
        qv = robot.random_q(rng)
        Mv, Jv = evaluate([q], [M, J], [qv])
        np.testing.assert_allclose(Mv, ref.mass_matrix(robot, qv), rtol=0, atol=1e-12)
        np.testing.assert_allclose(Jv, ref.constraint_jacobian(robot, cs, qv), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", SMALL_TREES)
def test_mass_factor_solves_and_inverts(name):
    """M⁻¹ b by the factor's two triangular solves, and the factor's M⁻¹ entries."""
    robot, _ = case(name)
    q, b = ca.SX.sym("q", robot.nq), ca.SX.sym("b", robot.nv)
    fac = MassFactor(robot, mass_matrix(robot, local_transforms(robot, q)))
    x = ca.vertcat(*fac.solve([b[d] for d in range(robot.nv)]))
    inv = linalg.to_sx(fac.inverse(), robot.nv)
    rng = np.random.default_rng(1)
    qv, bv = robot.random_q(rng), rng.normal(size=robot.nv)
    xv, iv = evaluate([q, b], [x, inv], [qv, bv])
    M = ref.mass_matrix(robot, qv)
    np.testing.assert_allclose(xv.ravel(), np.linalg.solve(M, bv), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(iv, np.linalg.inv(M), rtol=1e-10, atol=1e-12)
