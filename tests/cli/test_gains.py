"""cli/gains.py and `simulate --kp/--kd/--gains` (issue 34 point 5, the CLI half): per-joint PD gains by fnmatch
pattern on joint names, a bare number for every joint, a JSON file, one-line refusals naming the known joints."""
import json

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.cli.gains import joint_gains, joint_names
from casadi_delassus.simulation.feedback import one_dof_joints, pd_controller
from casadi_delassus.errors import InputError

from cli.test_cli import in_process


@pytest.fixture(scope="module")
def go1():
    return cd.load_robot("go1")


def test_names_follow_the_one_dof_order(go1):
    names = joint_names(go1)
    assert len(names) == len(one_dof_joints(go1)[1]) == 12 and names[:3] == ["FL_hip_joint", "FL_thigh_joint",
                                                                             "FL_calf_joint"]


def test_patterns_numbers_and_order(go1):
    names = joint_names(go1)
    kp, kd = joint_gains(go1, ["50", "*_calf_joint=20", "FL_*=7"], ["2", "RR_hip_joint=0.5"])
    want = {n: 7.0 if n.startswith("FL_") else 20.0 if n.endswith("_calf_joint") else 50.0 for n in names}
    assert dict(zip(names, kp)) == want
    assert dict(zip(names, kd)) == {n: 0.5 if n == "RR_hip_joint" else 2.0 for n in names}


def test_the_vector_reaches_pd_controller_by_name(go1):
    """The gain set for a joint name sits on that joint's velocity in the controller's Kp (read from the model's
    bodies here, not from gains.py)."""
    kp, kd = joint_gains(go1, ["RL_thigh_joint=33"], ["1"])
    c = pd_controller(go1, go1.neutral_q(), kp, kd)
    v = next(b.v_index for b in go1.bodies if b.joint.name == "RL_thigh_joint")
    assert c.Kp[v, v] == 33 and np.count_nonzero(c.Kp) == 1 and np.count_nonzero(c.Kd) == 12


def test_a_file_then_the_options(go1, tmp_path):
    path = tmp_path / "gains.json"
    path.write_text(json.dumps({"kp": {"*": 40, "FR_*": 10}, "kd": 3}))
    kp, kd = joint_gains(go1, ["FR_calf_joint=1"], [], str(path))
    names = joint_names(go1)
    assert dict(zip(names, kp)) == {n: 1.0 if n == "FR_calf_joint" else 10.0 if n.startswith("FR_") else 40.0
                                    for n in names}
    assert set(kd) == {3.0}


@pytest.mark.parametrize("kp, text, words", [
    (["wrist*=3"], None, "--kp: no one-DoF joint matches 'wrist*' (joints: FL_hip_joint, FL_thigh_joint"),
    (["FL_*=stiff"], None, "--kp FL_*: expected a finite number, got 'stiff'"),
    (["nan"], None, "--kp: expected a finite number"),
    ([], "{", "cannot read it as JSON"),
    ([], '{"kp": 1, "ki": 2}', "expected an object with keys kp and/or kd"),
    ([], '{"kp": {"arm*": 1}}', "--gains kp: no one-DoF joint matches 'arm*'"),
])
def test_refusals_are_one_line(go1, tmp_path, kp, text, words):
    path = None
    if text is not None:
        path = tmp_path / "g.json"
        path.write_text(text)
    with pytest.raises(InputError) as e:
        joint_gains(go1, kp, [], path and str(path))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_cli_refuses_an_unknown_joint_before_building(tmp_path):
    code, out, err = in_process("simulate", "go1", "-s", "4F3", "--kp", "*wrist*=5", "-o", str(tmp_path / "o"),
                                "--out-dir", str(tmp_path / "b"))
    assert code == 2 and err.startswith("error: --kp: no one-DoF joint matches '*wrist*' (joints: FL_hip_joint")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists() and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_g1_stands_with_light_wrists(tmp_path):
    """G1 on its 8 sole corners: per-joint gains with the light wrists at kp 5 (the rest at 300) run 0.3 s through
    where kp 300 on every joint stops early (issue 34's report; measured: 'not converged' after 13 steps)."""
    args = ["g1", "-s", "8F3", "-T", "0.3", "--drop", "0", "--kd", "2", "--solver", "admm", "--out-dir",
            str(tmp_path / "b")]
    code, out, err = in_process("simulate", *args, "--kp", "300", "--kp", "*wrist*=5", "--kd", "*wrist*=0.1",
                                "-o", str(tmp_path / "light"))
    assert code == 0 and out.startswith("300 steps of 0.001 s, ok"), (out, err)
    code_all, out_all, _ = in_process("simulate", *args, "--kp", "300", "-o", str(tmp_path / "stiff"))
    assert code_all == 1 and int(out_all.split()[0]) < 300, out_all
