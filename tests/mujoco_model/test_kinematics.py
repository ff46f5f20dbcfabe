"""kinematics.py against MuJoCo's own kinematics: body poses, quaternions (their sign included),
point Jacobians and subtree centres of mass, on random states."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.mujoco_model.kinematics import Kinematics, normalized_q

from .common import load, mujoco, random_state, relative


@pytest.mark.parametrize("name", ["mjcf_rig", "mjcf_ball_creature", "ant"])
def test_poses_jacobians_and_subtree_coms_equal_mujoco(name):
    m = load(name)
    q, p = ca.SX.sym("q", m.nq), ca.SX.sym("p", 3)
    kin = Kinematics(m, q)
    poses = ca.Function("poses", [q], [ca.horzcat(*kin.xpos), ca.horzcat(*kin.xquat),
                                       ca.horzcat(*[ca.reshape(kin.xmat[b].T, 9, 1) for b in range(m.nbody)]),
                                       ca.horzcat(*[kin.subtree_com(b) for b in range(m.nbody)])])
    jac = [ca.Function("point_jacobian", [q, p], list(kin.jacobian(b, p))) for b in range(m.nbody)]
    d, rng = mujoco.MjData(m), np.random.default_rng(1)
    for _ in range(10):
        random_state(m, d, rng)
        xpos, xquat, xmat, com = (np.array(x).T for x in poses(d.qpos))
        assert relative(xpos, d.xpos) < 1e-14 and relative(xquat, d.xquat) < 1e-14 and relative(xmat, d.xmat) < 1e-14
        assert relative(com, d.subtree_com) < 1e-13
        point = rng.normal(size=3)
        for b in range(1, m.nbody):
            jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jac(m, d, jp, jr, point, b)
            Jp, Jr = (np.array(x) for x in jac[b](d.qpos, point))
            assert relative(Jp, jp) < 1e-13 and np.abs(Jr - jr).max() < 1e-14


def test_quaternions_of_qpos_are_normalized_as_mujoco_does():
    """An unnormalized qpos gives the kinematics of its normalized quaternions (MuJoCo's copy)."""
    m = load("mjcf_ball_creature")
    q = ca.SX.sym("q", m.nq)
    f = ca.Function("f", [q], [ca.horzcat(*Kinematics(m, q).xpos), normalized_q(m, q)])
    d = mujoco.MjData(m)
    random_state(m, d, np.random.default_rng(2))
    scaled = d.qpos.copy()
    scaled[3:7] *= 1.7
    scaled[7:11] *= 0.4
    xpos, qn = (np.array(x) for x in f(scaled))
    assert relative(xpos.T, d.xpos) < 1e-14 and relative(qn.ravel(), d.qpos) < 1e-15
