"""Issue 13, point 3: `casadi-delassus links MODEL` and ``cd.links``: joints in q order with
nq, nv, their q and v ranges and q entries; bodies, frames (links merged by fixed joints) and
sites by kind, each with the body it rides on; table by default, JSON on request."""
import json

import numpy as np

import casadi_delassus as cd
from casadi_delassus.model.links import describe_links, frame_rows
from casadi_delassus.model.robot import Frame, Robot

from cli_runner import run_cli as run
from conftest import tilted_robot


def test_links_json_gives_the_q_layout_and_every_constraint_name():
    r = run("links", "talos", "--format", "json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    robot = cd.load_robot("talos")
    assert (info["nq"], info["nv"], info["floating_base"]) == (51, 50, True)
    root = info["joints"][0]
    assert root["type"] == "free" and root["q"] == [0, 7] and root["v"] == [0, 6]
    assert root["q_entries"] == ["x", "y", "z", "qx", "qy", "qz", "qw"]
    # the ranges tile q and v in order, and are the loader's
    assert [j["q"][0] for j in info["joints"]] == [b.q_index for b in robot.bodies]
    assert all(a["q"][1] == b["q"][0] and a["v"][1] == b["v"][0] for a, b in zip(info["joints"], info["joints"][1:]))
    assert info["joints"][-1]["q"][1] == 51 and info["joints"][-1]["v"][1] == 50
    kinds = {f["name"]: (f["kind"], f["body"]) for f in info["frames"]}
    assert set(kinds) == set(robot.frames)                       # every name a spec may use
    assert kinds["left_sole_link"] == ("frame", "leg_left_6_link")       # merged by a fixed joint
    assert kinds["leg_left_6_link"] == ("body", "leg_left_6_link")


def test_links_table_lists_joints_and_frames():
    r = run("links", "go1", "--fixed-base")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("go1: nq = 12, nv = 12, fixed base")
    line = next(line for line in out.splitlines() if line.startswith("FL_calf_joint"))
    assert line.split()[:8] == ["FL_calf_joint", "revolute", "FL_calf", "FL_thigh", "1", "1", "2", "2"]
    assert any(line.split()[:3] == ["FL_foot", "frame", "FL_calf"] for line in out.splitlines())


def test_continuous_prismatic_and_sites():
    """q entries per joint type; a frame a loader marks as a site prints as a site (MJCF)."""
    robot = tilted_robot()
    info = describe_links(robot)
    types = {j["type"]: j["q_entries"] for j in info["joints"]}
    assert types["continuous"] == ["cos", "sin"] and types["prismatic"] == ["offset"]
    bodies = robot.bodies
    site = Robot("with_site", bodies, [Frame("toe_site", 3, np.eye(3), np.array([0.1, 0, 0]), kind="site")])
    rows = {r[0]: r for r in frame_rows(describe_links(site))}
    assert rows["toe_site"][1:3] == ["site", "t3"] and rows["toe_site"][3] == "(0.1, 0, 0)"
    assert rows["t3"][1] == "body"


def test_python_links_matches_the_cli():
    info = cd.links("chain:n=3")
    assert [j["joint"] for j in info["joints"]] == [b.joint.name for b in cd.load_robot("chain:n=3").bodies]
    assert json.loads(run("links", "chain:n=3", "--format", "json").stdout) == info


def test_links_marks_mimic_joints(tmp_path):
    """A gripper's mimic joint (panda's finger, xArm's gripper) is marked: the joint it follows,
    the multiplier and offset, in the table and the JSON, and a note says it is an
    independent DoF here (as Pinocchio's mimic=False)."""
    inertial = ('<inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" ixy="0" ixz="0" iyz="0"/>'
                '</inertial>')
    links = "".join(f'<link name="{n}">{inertial}</link>' for n in ("hand", "left", "right"))
    joint = ('<joint name="{n}" type="prismatic"><parent link="hand"/><child link="{c}"/><axis xyz="0 {s} 0"/>'
             '<limit lower="0" upper="0.04" effort="1" velocity="1"/>{m}</joint>')
    urdf = tmp_path / "gripper.urdf"
    urdf.write_text('<robot name="gripper">' + links + joint.format(n="finger1", c="left", s=1, m="") +
                    joint.format(n="finger2", c="right", s=-1, m='<mimic joint="finger1" multiplier="1" offset="0"/>')
                    + "</robot>")
    info = json.loads(run("links", urdf, "--fixed-base", "--format", "json").stdout)
    by_name = {j["joint"]: j for j in info["joints"]}
    assert by_name["finger2"]["mimic"] == {"joint": "finger1", "multiplier": 1.0, "offset": 0.0}
    assert by_name["finger1"]["mimic"] is None
    table = run("links", urdf, "--fixed-base")
    line = next(l for l in table.stdout.splitlines() if l.startswith("finger2"))
    assert "finger1 × 1 + 0" in line
    assert "mimic joints are independent" in table.stdout
