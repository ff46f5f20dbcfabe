"""sweeps/articulated.py on small trees: the articulated-body pivots D_i are the pivots of a
factorization of M(q) (NumPy reference), so their product (with det H_b^A at a free base) is
det M, and S_iᵀ P_i = 0: what is projected through a joint has no component along it."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.sweeps.articulated import articulated_inertias, unit_axis
from casadi_delassus.symbolic.frames import slid_transforms
from casadi_delassus.verify import reference as ref

from conftest import SMALL_TREES, case, evaluate


@pytest.mark.parametrize("name", SMALL_TREES)
def test_pivots_multiply_to_det_M(name):
    robot, cs = case(name)
    q = ca.SX.sym("q", robot.nq)
    abi = articulated_inertias(robot, slid_transforms(robot, cs, q))
    pivots = [art.D for art in abi]                  # a free base's D is its whole 6x6 H_b^A
    rng = np.random.default_rng(2)
    for _ in range(3):
        qv = robot.random_q(rng)
        det = np.prod([np.linalg.det(np.atleast_2d(x)) for x in evaluate([q], pivots, [qv])])
        # a free base's D is in its body frame, [angular; linear]: a change of basis of det ±1
        assert abs(det) == pytest.approx(abs(np.linalg.det(ref.mass_matrix(robot, qv))), rel=1e-10)


@pytest.mark.parametrize("name", SMALL_TREES)
def test_projected_inertia_annihilates_the_joint_axis(name):
    """H^a_i S_i = 0 (P_i = 1 − U_i D_i⁻¹ S_iᵀ) for every 1-DoF joint, at a random q."""
    robot, cs = case(name)
    q = ca.SX.sym("q", robot.nq)
    abi = articulated_inertias(robot, slid_transforms(robot, cs, q))
    one_dof = [i for i, art in enumerate(abi) if not art.free and not art.multi]
    Ha = evaluate([q], [abi[i].Ha for i in one_dof], [robot.random_q(np.random.default_rng(3))])
    for i, H in zip(one_dof, Ha):
        S = np.asarray(abi[i].S, float).reshape(6, -1)
        assert np.abs(H @ S).max() <= 1e-12 * max(1.0, np.abs(H).max())


def test_unit_axis_reads_a_coordinate_axis():
    S = np.zeros((6, 1))
    S[4, 0] = -1.0
    assert unit_axis(S) == (4, -1.0)
    assert unit_axis(np.array([[0.6], [0.8], [0], [0], [0], [0]]))[0] is None
