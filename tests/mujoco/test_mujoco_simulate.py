"""`casadi-delassus simulate model.xml` (casadi_delassus/mujoco/simulate.py): an MJCF model on cd.mujoco_rollout with
its own physics, its CSV against mujoco.rollout itself, and what an MJCF model does not take refused in one line with
nothing written (issue 32: "`casadi-delassus simulate model.xml` runs on it")."""
import csv

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
from mujoco import rollout as mj_rollout  # noqa: E402

from mujoco_model.mj_scenes import installed  # noqa: E402
from cli.test_cli import in_process  # noqa: E402
from test_mujoco_rollout import tight  # noqa: E402

CTRL = [0.3, -0.2, 0.1]


@pytest.fixture(scope="module")
def hopper_xml(tmp_path_factory):
    """Gymnasium's hopper with MuJoCo's Newton solve run to 1e-15 (its answer is then the problem's unique one, which
    the compiled solve finds), saved as a file."""
    spec = mujoco.MjSpec.from_file(str(installed("gymnasium", "gymnasium/envs/mujoco/assets/hopper.xml")))
    m = tight(spec.compile())
    spec.option.solver, spec.option.tolerance = m.opt.solver, m.opt.tolerance
    spec.option.iterations, spec.option.ls_iterations = m.opt.iterations, m.opt.ls_iterations
    path = tmp_path_factory.mktemp("hopper") / "hopper.xml"
    path.write_text(spec.to_xml())
    return path


def test_the_csv_equals_mujoco_rollout(hopper_xml, tmp_path, out_dir):
    """300 steps (0.6 s at the model's 2 ms) under constant controls: the CSV's qpos within 1e-6 of mujoco.rollout's
    and qvel within 1e-5 relative (issue 32's bounds), its columns named by joint and actuator."""
    code, out, err = in_process("simulate", str(hopper_xml), "-T", "0.6", "--ctrl", ",".join(map(str, CTRL)),
                                "-o", str(tmp_path), "--out-dir", str(out_dir))
    assert code == 0 and "300 steps of 0.002 s (the model's), ok" in out, (out, err)
    with open(tmp_path / "rollout.csv") as f:
        rows = list(csv.reader(f))
    header, table = rows[0], np.array(rows[1:], float)
    m = mujoco.MjModel.from_xml_path(str(hopper_xml))
    d = mujoco.MjData(m)
    assert header[:3] == ["t", "rootx", "rootz"] and "v_thigh_joint" in header and len(table) == 300
    full = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.empty(mujoco.mj_stateSize(m, full))
    mujoco.mj_getState(m, d, state0, full)
    state, _ = mj_rollout.rollout(m, d, state0, np.tile(CTRL, (1, 300, 1)))
    qpos, qvel = state[0, :-1, 1:1 + m.nq], state[0, :-1, 1 + m.nq:1 + m.nq + m.nv]   # row k: the state before step k
    assert np.max(np.abs(table[1:, 1:1 + m.nq] - qpos)) <= 1e-6
    assert np.max(np.abs(table[1:, 1 + m.nq:1 + m.nq + m.nv] - qvel)) <= 1e-5 * max(1.0, np.max(np.abs(qvel)))
    assert np.max(np.abs(table[1:, 1:1 + m.nq] - table[0, 1:1 + m.nq])) > 1e-2      # it did move
    assert (tmp_path / "rollout.png").stat().st_size > 0


@pytest.mark.parametrize("args, words", [
    (["--kp", "3"], "--kp: an MJCF model takes these from its own file"),
    (["-c", "foot"], "--contact: an MJCF model takes these from its own file"),
    (["--dt", "1e-3"], "--dt: an MJCF model takes these from its own file"),
    (["--ctrl", "1,2"], "--ctrl must be 3 finite numbers (the model's actuators), got 2"),
    (["--ctrl", "1,nan,2"], "--ctrl must be 3 finite numbers"),
    (["--keyframe", "standing"], "unknown keyframe 'standing' of the model (0 keyframes)"),
    (["-T", "0"], "T = 0.0 s is less than half a step of dt = 0.002 s: no step to take"),
    (["-T", "1e9"], "more than the 10,000,000 one rollout takes"),
])
def test_refusals_write_nothing(hopper_xml, tmp_path, args, words):
    code, _, err = in_process("simulate", str(hopper_xml), *args, "-o", str(tmp_path / "sim"))
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "sim").exists()


def test_mjcf_options_are_refused_for_other_models(tmp_path):
    code, _, err = in_process("simulate", "go1", "--ctrl", "1", "-o", str(tmp_path / "sim"))
    assert code == 2 and "--ctrl: for MJCF models only (go1 is not one)" in err
