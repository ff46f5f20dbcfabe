"""Issue 13, point 7 (done-when 1): bench/erd_models.py's contact rule and its per-model check
against Pinocchio's own parse, on a few example-robot-data URDFs (the bench runs all of them);
two of them compiled and checked through ``cd.check``."""
import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

import casadi_delassus as cd

from cli_runner import run_cli

pytest.importorskip("pinocchio")
try:
    importlib.metadata.distribution("example-robot-data")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("example-robot-data is not installed", allow_module_level=True)

_spec = importlib.util.spec_from_file_location("erd_models", Path(__file__).resolve().parents[2] / "bench" / "erd_models.py")
erd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(erd)


def path(rel):
    p = erd.erd_robots_dir() / rel
    if not p.is_file():
        pytest.skip(f"{rel} is not in this example-robot-data")
    return p


@pytest.mark.parametrize("rel, floating, specs", [
    ("talos_data/robots/talos_reduced.urdf", True, ["left_sole_link:6d", "right_sole_link:6d"]),
    ("go1_description/urdf/go1.urdf", True, ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]),
    ("g1_description/urdf/g1_29dof_rev_1_0.urdf", True, ["left_ankle_roll_link:6d", "right_ankle_roll_link:6d"]),
    ("ur_description/urdf/ur5_robot.urdf", False, ["ee_link:6d"]),   # ee_link and tool0 tie: by name
    ("hector_description/robots/quadrotor_base.urdf", True, ["base_link:3d"]),
])
def test_contact_rule(rel, floating, specs):
    robot, got, _ = erd.contacts(path(rel))
    assert robot.floating_base == floating and got == specs


def test_a_footprint_is_not_a_foot():
    robot, specs, rule = erd.contacts(path("tiago_description/robots/tiago_no_hand.urdf"))
    assert not robot.floating_base and rule.startswith("fixed base") and "footprint" not in specs[0]


@pytest.mark.parametrize("rel", ["ur_description/urdf/ur5_robot.urdf", "bolt_description/robots/bolt.urdf",
                                 "double_pendulum_description/urdf/double_pendulum.urdf"])
def test_every_delassus_algorithm_and_pv_agree_with_pinocchio(rel):
    import numpy as np
    row = erd.check_model(path(rel), 20, 1e-9, np.random.default_rng(0))
    assert row["status"] == "agrees", row
    assert set(row["results"]) == set(erd.ALGORITHMS)
    if "pendulum" in rel:       # 2 joints under a 6D weld: pv refuses the redundant rows, with the reason
        assert row["results"]["pv"] == "refused" and "pv refused" in row["reason"]


def test_refusals_say_whether_pinocchio_agrees():
    """romeo_laas_small: a negative principal moment of inertia, and Pinocchio's M singular too."""
    import numpy as np
    row = erd.check_model(path("romeo_description/urdf/romeo_laas_small.urdf"), 20, 1e-9, np.random.default_rng(0))
    assert row["status"] == "refused" and "no valid rigid-body inertia" in row["reason"]
    assert "singular too" in row["reason"]


@pytest.mark.parametrize("rel", ["icub_description/robots/icub_reduced.urdf", "human_description/robots/human.urdf"])
def test_icub_and_human_agree(rel):
    """Issue 13: bodies with singular inertia, but M is positive definite: they load and agree."""
    import numpy as np
    row = erd.check_model(path(rel), 20, 1e-9, np.random.default_rng(0))
    assert row["status"] == "agrees", row


@pytest.mark.parametrize("rel, algorithm", [("ur_description/urdf/ur5_robot.urdf", "pv_osimr"),
                                            ("solo_description/robots/solo12.urdf", "pv")])
def test_compiled(rel, algorithm, out_dir):
    robot, specs, _ = erd.contacts(path(rel))
    f = cd.generate(robot, specs, algorithm, out_dir=out_dir)
    out = cd.check(f, oracles=["numpy", "pinocchio"], samples=20, tol=1e-9)
    assert all(o.passed and len(o) >= 1 for o in out.values()), {k: dict(v) for k, v in out.items()}


def test_rows_no_joint_moves_are_one_line_not_a_zero_division():
    """A 3D point on a planar 2-DoF pendulum: the row along the hinge axes is exactly zero, so
    pv's base block has an exactly zero pivot (a ZeroDivisionError from deep inside before)."""
    p = path("double_pendulum_description/urdf/double_pendulum.urdf")
    r = run_cli("count", p, "--fixed-base", "-c", "link2:3d", "-a", "pv")
    assert r.returncode == 2 and "exactly zero" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
