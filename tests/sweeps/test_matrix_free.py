"""sweeps/matrix_free.py on small trees: the merged sweeps of the matrix-free paper's Alg. 2
give ν̇ = M⁻¹ τ for joint forces τ, and, with the constraint forces Jᵀλ as link forces, the
constraint accelerations J M⁻¹ Jᵀ λ (NumPy reference)."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.sweeps.articulated import articulated_inertias
from casadi_delassus.sweeps.joint_space import link_rows
from casadi_delassus.sweeps.matrix_free import constraint_accelerations, constraint_forces, inverse_inertia_sweeps
from casadi_delassus.symbolic.frames import slid_transforms
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_joint_forces_give_inverse_inertia_times_tau(name):
    robot, cs = case(name)
    q, tau = ca.SX.sym("q", robot.nq), ca.SX.sym("tau", robot.nv)
    T = slid_transforms(robot, cs, q, move_free=False)        # a free base's S_b: Pinocchio's [linear; angular]
    taus = [tau[b.v_index:b.v_index + b.joint.nv] for b in robot.bodies]
    _, nu = inverse_inertia_sweeps(robot, T, articulated_inertias(robot, T), [None] * robot.n_bodies, taus)
    rng = np.random.default_rng(7)
    qv, tv = robot.random_q(rng), rng.normal(size=robot.nv)
    got = evaluate([q, tau], [ca.vertcat(*nu)], [qv, tv])[0].ravel()
    np.testing.assert_allclose(got, np.linalg.solve(ref.mass_matrix(robot, qv), tv), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", SMALL_TREES)
def test_constraint_forces_give_the_delassus_product(name):
    robot, cs = case(name)
    q, lam = ca.SX.sym("q", robot.nq), ca.SX.sym("lam", cs.m)
    T = slid_transforms(robot, cs, q)
    rows = link_rows(robot, cs, T, cs.K_body())
    a, nu = inverse_inertia_sweeps(robot, T, articulated_inertias(robot, T), *constraint_forces(robot, cs, rows, lam))
    out = constraint_accelerations(cs, rows, a, nu)
    rng = np.random.default_rng(8)
    qv, lv = robot.random_q(rng), rng.normal(size=cs.m)
    expected = ref.delassus(robot, cs, qv) @ lv
    np.testing.assert_allclose(evaluate([q, lam], [out], [qv, lv])[0].ravel(), expected, rtol=1e-9, atol=1e-10)
