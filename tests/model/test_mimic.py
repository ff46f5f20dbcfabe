"""Mimic joints coupled (load_robot(mimic=True)) against Pinocchio 4's mimic=True model."""
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.errors import ConstraintError
from casadi_delassus.model import load_robot

from cli_runner import run_cli

pin = pytest.importorskip("pinocchio")

LINK = '<link name="{0}"><inertial><mass value="{1}"/><origin xyz="0.01 0.02 0.1"/>' \
       '<inertia ixx="0.01" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>'
JOINT = '<joint name="{0}" type="{1}"><parent link="{2}"/><child link="{3}"/><origin xyz="0 0.05 0.2" ' \
        'rpy="0.1 0 0.2"/><axis xyz="{4}"/><limit lower="-1" upper="1" effort="1" velocity="1"/>{5}</joint>'
# a palm on an arm joint, a finger slide and a second finger that mimics it (as panda's hand),
# then a revolute tip that mimics the arm joint with an offset
GRIPPER = ('<robot name="gripper">' + "".join(LINK.format(n, m) for n, m in
           (("base", 2), ("palm", 1), ("left", 0.3), ("right", 0.4), ("tip", 0.2)))
           + JOINT.format("arm", "revolute", "base", "palm", "0 0 1", "")
           + JOINT.format("finger_l", "prismatic", "palm", "left", "0 1 0", "")
           + JOINT.format("finger_r", "prismatic", "palm", "right", "0 -1 0",
                          '<mimic joint="finger_l" multiplier="1.5" offset="0.01"/>')
           + JOINT.format("tip_j", "revolute", "right", "tip", "1 0 0",
                          '<mimic joint="arm" multiplier="-0.7" offset="0.3"/>')
           + "</robot>")
LINKS = ("left", "tip")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("mimic") / "gripper.urdf"
    path.write_text(GRIPPER)
    robot = load_robot(path, floating_base=False, mimic=True)
    return robot, pin.buildModelFromUrdf(str(path), mimic=True)


def pinocchio_delassus(model, q, links=LINKS):
    """J M⁻¹ Jᵀ from Pinocchio's mimic model: crba and LOCAL 6D frame Jacobians of ``links``."""
    data = model.createData()
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    J = np.vstack([pin.getFrameJacobian(model, data, model.getFrameId(n), pin.LOCAL) for n in links])
    return J @ np.linalg.solve(M, J.T)


def test_reduced_sizes_match_pinocchio(models):
    robot, model = models
    assert (robot.coupling.nq, robot.coupling.nv) == (model.nq, model.nv) == (2, 2)
    assert (robot.nq, robot.nv) == (4, 4)         # the full model underneath


def test_naive_matches_pinocchio_mimic_model(models):
    robot, model = models
    f = cd.casadi_function(robot, [f"{n}:6d" for n in LINKS], "naive")
    assert f.size1_in(0) == model.nq
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = robot.coupling.reduce(robot.random_q(rng))
        D, ref = np.array(f(q)), pinocchio_delassus(model, q)
        assert np.linalg.norm(D - ref) <= 1e-10 * np.linalg.norm(ref)
        # rank nv_r = 2 < m = 12: a Delassus matrix of the uncoupled (nv 4) model differs
        assert np.linalg.matrix_rank(D, 1e-9 * np.linalg.norm(D)) == 2


def test_auto_picks_naive_and_recursive_ones_refuse(models):
    robot, _ = models
    specs = [f"{n}:6d" for n in LINKS]
    assert cd.casadi_function(robot, specs).size1_in(0) == 2
    with pytest.raises(ConstraintError, match="coupled mimic joints.*-a naive"):
        cd.casadi_function(robot, specs, "pv_osim")


def test_coupled_build_has_its_own_name(models, tmp_path):
    from casadi_delassus.runtime.artifact import model_name
    robot, _ = models
    path = tmp_path / "gripper.urdf"
    path.write_text(GRIPPER)
    uncoupled = load_robot(path, floating_base=False)
    assert uncoupled.coupling is None and "_mimic" in model_name(robot) and model_name(uncoupled) != model_name(robot)


def test_cli_mimic_builds_naive_and_refuses_recursive_in_one_line(models, tmp_path):
    path = tmp_path / "gripper.urdf"
    path.write_text(GRIPPER)
    args = ["count", path, "--fixed-base", "--mimic", "-c", "left:6d", "-c", "tip:6d", "--format", "json"]
    ok = run_cli(*args)
    assert ok.returncode == 0 and '"naive"' in ok.stdout
    refused = run_cli(*args, "-a", "pv_osim")
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0 and "-a naive" in refused.stderr


def test_check_refuses_coupled_robot(models):
    from casadi_delassus.errors import DelassusError
    from casadi_delassus.verify.check import compare
    robot, _ = models
    with pytest.raises(DelassusError, match="mimic model"):
        compare(None, robot, None)


@pytest.mark.parametrize("floating", [False, True])
def test_panda_fingers_coupled_match_pinocchio(floating):
    """The registry's Panda: finger_joint2 mimics finger_joint1 (nv 9 -> 8), fixed or on a free base."""
    from casadi_delassus.model import registry
    if not registry.is_available("panda"):
        pytest.skip("example-robot-data is not installed")
    robot = load_robot("panda", floating_base=floating, mimic=True)
    base = [pin.JointModelFreeFlyer()] if floating else []
    model = pin.buildModelFromUrdf(str(registry.model_path("panda")), *base, mimic=True)
    assert (robot.nv - robot.coupling.nv, robot.coupling.nq, robot.coupling.nv) == (1, model.nq, model.nv)
    assert model.nv == 8 + 6 * floating
    links = ("panda_leftfinger", "panda_rightfinger", "panda_link7")
    f = cd.casadi_function(robot, [f"{n}:6d" for n in links], "naive")
    for _ in range(5):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        ref = pinocchio_delassus(model, q, links)
        assert np.linalg.norm(np.array(f(q)) - ref) <= 1e-10 * np.linalg.norm(ref)


def test_tangent_derivatives_refused_on_coupled_robot(models):
    from casadi_delassus.errors import DelassusError
    robot, _ = models
    with pytest.raises(DelassusError, match="coupled mimic joints"):
        cd.casadi_function(robot, ["left:6d"], "naive", tangent=True)
