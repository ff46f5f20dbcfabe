"""mujoco_model/geoms.py: every geom's world pose from q through our kinematics (the Robot of
model/mjcf.py, SX) equals MuJoCo's ``geom_xpos``/``geom_xmat`` after mj_kinematics, for models
with hinge references (hopper), bodies with several joints (humanoid), ball joints, bodies
welded to their parent or to the world."""
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

from casadi_delassus.model.mjcf import robot_from_mjmodel
from casadi_delassus.mujoco_model.geoms import geom_placements, geom_poses

from .mj_scenes import gymnasium_model, mujoco, poses, random_qpos
from .test_pairs import CROWD

BALLS = Path(__file__).resolve().parents[1] / "models" / "mjcf_ball_creature.xml"
MODELS = {"hopper": lambda: gymnasium_model("hopper"), "humanoid": lambda: gymnasium_model("humanoid"),
          "balls": lambda: mujoco.MjModel.from_xml_path(str(BALLS)),
          "crowd": lambda: mujoco.MjModel.from_xml_string(CROWD)}


@pytest.mark.parametrize("name", MODELS)
def test_geom_poses_from_q_are_mujocos(name):
    m = MODELS[name]()
    robot = robot_from_mjmodel(m, name)
    q = ca.SX.sym("q", m.nq)
    placed = geom_poses(robot, geom_placements(m, robot), q)
    f = ca.Function("poses", [q], [ca.vertcat(*[ca.vec(ca.SX(R).T) for R, _ in placed.values()]),
                                   ca.vertcat(*[ca.SX(p) for _, p in placed.values()])])
    Q = random_qpos(m, 20, np.random.default_rng(4))
    xpos, xmat = poses(m, Q)
    assert any(pl.body < 0 for pl in geom_placements(m, robot).values())      # the floor, fixed in the world
    for k, x in enumerate(Q):
        R, p = (np.asarray(v).reshape(-1) for v in f(x))
        np.testing.assert_allclose(R, xmat[k].reshape(-1), atol=1e-14)
        np.testing.assert_allclose(p, xpos[k].reshape(-1), atol=1e-14)
