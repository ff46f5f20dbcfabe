"""smooth.py (and passive.py, actuators.py) against MuJoCo after mj_forward on random states: M with
armature, qfrc_bias, qfrc_passive (springs about qpos_spring on hinge, slide, ball and free joints;
dampers), actuator_force and qfrc_actuator (motor, position with kv, velocity, general affine; gear,
ctrl and force clamps, a joint actuator force range, a disabled group), qfrc_smooth, qacc_smooth."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model.model import MujocoModel
from casadi_delassus.mujoco_model.smooth import smooth_function

from .common import load, mujoco, random_state, relative

FIELDS = ("M", "qfrc_bias", "qfrc_passive", "actuator_force", "qfrc_actuator", "qfrc_smooth", "qacc_smooth")


def worst_errors(name, states, seed=0):
    """{field: max relative error over ``states`` random states} against mj_forward."""
    m = load(name)
    f = smooth_function(MujocoModel(m))
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    worst = dict.fromkeys(FIELDS, 0.0)
    for _ in range(states):
        random_state(m, d, rng)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, M)
        ref = dict(M=M, qfrc_bias=d.qfrc_bias, qfrc_passive=d.qfrc_passive, actuator_force=d.actuator_force,
                   qfrc_actuator=d.qfrc_actuator, qfrc_smooth=d.qfrc_smooth, qacc_smooth=d.qacc_smooth)
        out = dict(zip(FIELDS, (np.array(x) for x in f(d.qpos, d.qvel, d.ctrl, d.qfrc_applied))))
        for k in FIELDS:
            worst[k] = max(worst[k], relative(out[k].reshape(np.shape(ref[k])), ref[k]))
    return worst


@pytest.mark.parametrize("name", ["mjcf_rig", "mjcf_ball_creature", "ant"])
def test_smooth_dynamics_equal_mujoco(name):
    worst = worst_errors(name, 20)
    assert max(worst.values()) < 1e-12, worst


def test_the_rig_exercises_every_passive_and_actuator_term():
    """The rig's states reach the clamps (ctrl beyond ctrlrange, a position actuator at its
    forcerange), its disabled group gives 0, and springs and dampers act on every joint kind."""
    m = load("mjcf_rig")
    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    clamped = 0
    for _ in range(20):
        random_state(m, d, rng)
        clamped += abs(d.actuator_force[1]) == 5
        assert d.actuator_force[4] == 0
    assert clamped > 0 and np.count_nonzero(m.jnt_stiffness) >= 5 and set(m.jnt_type[m.jnt_stiffness > 0]) == {0, 1, 2, 3}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["humanoid", "walker2d_v5", "hopper", "go2", "g1", "h1"])
def test_smooth_dynamics_equal_mujoco_on_the_issue_robots(name):
    worst = worst_errors(name, 30)
    assert max(worst.values()) < 1e-12, worst
