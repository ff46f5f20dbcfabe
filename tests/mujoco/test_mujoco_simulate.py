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


# -- cd.simulate of an MJCF model: the per-step route (issue 32's last bullet) ------------------------------------
import casadi_delassus as cd  # noqa: E402
from casadi_delassus.errors import InputError  # noqa: E402
from test_mujoco_rollout import controls, rig, start  # noqa: E402

RIG_STEPS = 300


@pytest.fixture(scope="module")
def rig_model():
    return rig()


def _feedback(m):
    """A state feedback in MuJoCo's actuator inputs: each actuator's ctrl a PD of its joint about 0.1 (beyond the
    ranges: MuJoCo clamps)."""
    joint = m.actuator_trnid[:, 0]
    qadr, vadr = m.jnt_qposadr[joint], m.jnt_dofadr[joint]
    return lambda t, qpos, qvel: -3.0 * (qpos[qadr] - 0.1) - 0.5 * qvel[vadr] + 0.2 * np.sin(5.0 * t)


def test_per_step_mjcf_equals_a_loop_of_mj_step(rig_model, out_dir):
    """cd.simulate(MjModel, T, controller) under a state feedback: 300 steps of the rig (contacts, limits, equality,
    clamped actuators) equal to a Python loop of mujoco.mj_step with the same controller, MuJoCo's Newton at 1e-15:
    qpos within 1e-6, qvel within 1e-5 relative (issue 32's bounds), the ctrl recorded the controller's."""
    m, x0 = rig_model, start(rig_model, 1, 3)[0]
    qpos0, qvel0 = x0[1:1 + m.nq], x0[1 + m.nq:1 + m.nq + m.nv]
    control = _feedback(m)
    r = cd.simulate(m, T=RIG_STEPS * m.opt.timestep, controller=control, q0=qpos0, v0=qvel0, out_dir=out_dir, quiet=True)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    qpos, qvel, ctrl, ncon = [d.qpos.copy()], [d.qvel.copy()], [], 0
    for _ in range(RIG_STEPS):
        d.ctrl[:] = control(d.time, d.qpos.copy(), d.qvel.copy())
        ctrl.append(d.ctrl.copy())
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
        qvel.append(d.qvel.copy())
        ncon += d.ncon
    assert ncon > 0 and r.status == "ok" and r.qpos.shape == (RIG_STEPS + 1, m.nq) and r.dt == m.opt.timestep
    assert np.abs(r.qpos - np.array(qpos)).max() <= 1e-6
    assert (np.abs(r.qvel - np.array(qvel)) / np.maximum(1.0, np.abs(np.array(qvel)))).max() <= 1e-5
    assert np.abs(r.ctrl - np.array(ctrl)).max() <= 1e-5


def test_per_step_mjcf_open_loop_is_one_mujoco_rollout_call(rig_model, out_dir):
    """An open-loop controller (ctrl read from a table by the step's time): the per-step route, one compiled call per
    step with the warm start carried as qacc_warmstart, is cd.mujoco_rollout's one call bit for bit; without the carried
    warm start (every step from 0) it is not."""
    m, x0 = rig_model, start(rig_model, 1, 4)
    u = controls(m, 1, RIG_STEPS)
    table = lambda t, qpos, qvel: u[0, int(round(t / m.opt.timestep))]        # noqa: E731
    r = cd.simulate(m, T=RIG_STEPS * m.opt.timestep, controller=table, q0=x0[0, 1:1 + m.nq],
                    v0=x0[0, 1 + m.nq:1 + m.nq + m.nv], dt=m.opt.timestep, out_dir=out_dir, quiet=True)
    ref, sens = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=out_dir)
    assert np.array_equal(r.qpos[1:], ref[0, :, 1:1 + m.nq]) and np.array_equal(r.qvel[1:], ref[0, :, 1 + m.nq:])
    assert np.array_equal(r.sensordata, sens[0]) and np.array_equal(r.ctrl, u[0])
    from casadi_delassus.mujoco.rollout import _compiled
    compiled, state, cold = _compiled(m, out_dir, None)[1], x0.copy(), []
    for k in range(RIG_STEPS):          # the same calls, each from a zero warm start
        state = np.ascontiguousarray(compiled.run(state, None, u[:, k:k + 1].copy(), 1, 1, False)[0][:, 0])
        cold.append(state[0, 1:1 + m.nq])
    assert not np.array_equal(np.array(cold), r.qpos[1:])


def test_an_mjcf_file_and_a_robot_from_it_take_the_per_step_route(tmp_path, out_dir):
    """The MJCF file's path and a Robot loaded from it run the same route as its MjModel (a ball dropped on the floor
    under no controller: zero ctrl), and the trajectory writes the CLI's CSV, a ctrl row per step."""
    from casadi_delassus.mujoco.simulate import write_csv
    path = tmp_path / "ball.xml"
    path.write_text('<mujoco model="ball"><option timestep="0.002"/><worldbody><geom type="plane" size="1 1 .1"/>'
                    '<body pos="0 0 .2"><freejoint/><geom type="sphere" size="0.05" mass="1"/></body></worldbody>'
                    '</mujoco>')
    a = cd.simulate(str(path), T=0.4, out_dir=out_dir, quiet=True)
    b = cd.simulate(cd.load_robot(str(path)), T=0.4, out_dir=out_dir, quiet=True)
    assert a.name == "ball" and a.qpos.shape == (201, 7) and np.array_equal(a.qpos, b.qpos)
    assert abs(a.qpos[-1, 2] - 0.05) < 1e-3            # at rest on the floor
    rows = write_csv(a, tmp_path / "r.csv").read_text().splitlines()
    assert len(rows) == 201 and rows[0].startswith("t,")


@pytest.mark.parametrize("kwargs, message", [
    ({"contacts": ["base@0,0,0"]}, "has its own contacts .*leave contacts out"),
    ({"mu": 0.5}, r"an MJCF model runs the physics its file states: mu not taken"),
    ({"linear_solve": "dense", "baumgarte": 0.1}, "baumgarte, linear_solve not taken"),
    ({"dt": 1e-3}, r"dt = 0.001: an MJCF model steps at its own time step, 0.004 s"),
    ({"T": None}, "takes T"),
    ({"q0": np.zeros(3)}, r"q0 \(qpos\) must be 21 finite numbers"),
    ({"v0": [np.nan] * 18}, r"v0 \(qvel\) must be 18 finite numbers"),
    ({"controller": lambda t, q, v: np.zeros(2)}, r"the controller's ctrl at step 0 \(t = 0 s\) must be 6 finite numbers"),
    ({"controller": lambda t, q, v: np.full(6, np.nan)}, "with a non-finite one"),
])
def test_per_step_mjcf_refusals_are_one_line(rig_model, out_dir, kwargs, message):
    """What an MJCF model states itself (contacts, time step, ground, solver) given again, a state of the wrong size
    and a controller's bad ctrl: one line each."""
    kw = {"T": 0.04, "out_dir": out_dir, "quiet": True, **kwargs}
    with pytest.raises(InputError, match=message):
        cd.simulate(rig_model, **kw)


# a slide joint whose motor pushes 1e12 N on 1 kg: its first qacc is beyond MuJoCo's 1e10, a divergence
DIVERGING = """<mujoco><worldbody><geom type="plane" size="1 1 0.1"/><body name="ball" pos="0 0 0.5">
<joint name="slide" type="slide" axis="0 0 1"/><geom type="sphere" size="0.1" mass="1"/></body></worldbody>
<actuator><motor name="push" joint="slide" gear="1e12"/></actuator></mujoco>"""


def test_a_diverged_rollout_is_read_from_its_status(tmp_path, out_dir, monkeypatch):
    """`simulate model.xml` says "diverged" and exits 1 by the C rollout's status (runtime/mujoco_rollout.py DIVERGED),
    not by the wording of cd.mujoco_rollout's warning: with that warning silenced it still does, and
    cd.mujoco_rollout itself still warns, at its caller's line."""
    from casadi_delassus.mujoco import rollout
    from casadi_delassus.mujoco.simulate import simulate_model
    path = tmp_path / "diverging.xml"
    path.write_text(DIVERGING)
    with pytest.warns(RuntimeWarning, match=r"trajectories \[0\] diverged") as said:
        m = mujoco.MjModel.from_xml_path(str(path))
        cd.mujoco_rollout(m, mujoco.MjData(m), np.zeros((1, 3)), np.ones((1, 5, 1)), out_dir=out_dir)
    assert said[0].filename == __file__
    monkeypatch.setattr(rollout, "_warn", lambda status: None)
    assert simulate_model(path, 0.05, [1.0], out_dir=out_dir).status == "diverged"
    assert simulate_model(path, 0.05, [0.0], out_dir=out_dir).status == "ok"
    code, out, err = in_process("simulate", str(path), "-T", "0.05", "--ctrl", "1", "--out-dir", str(out_dir), "-o",
                                str(tmp_path / "sim"))
    assert code == 1 and ", diverged" in out and (tmp_path / "sim" / "rollout.csv").exists(), (out, err)


def test_a_capped_solve_is_said(tmp_path, out_dir, monkeypatch):
    """A trajectory whose C status is MAX_ITERATIONS (some step's constraint solve stopped at its limit) reads
    "max iterations" in ModelTrajectory.status and the CLI's line, and the CLI still exits 0 with its CSV."""
    from casadi_delassus.mujoco import simulate
    from casadi_delassus.runtime.mujoco_rollout import MAX_ITERATIONS
    path = tmp_path / "ball.xml"
    path.write_text(DIVERGING)
    real = simulate.rollout_status

    def capped(*args, **kwargs):
        state, sens, status = real(*args, **kwargs)
        return state, sens, np.full_like(status, MAX_ITERATIONS)

    monkeypatch.setattr(simulate, "rollout_status", capped)
    traj = simulate.simulate_model(path, 0.05, [0.0], out_dir=out_dir)
    assert traj.status == "max iterations" and not traj.diverged
    code, out, err = in_process("simulate", str(path), "-T", "0.05", "--ctrl", "0", "--out-dir", str(out_dir), "-o",
                                str(tmp_path / "sim"))
    assert code == 0 and ", max iterations" in out and (tmp_path / "sim" / "rollout.csv").exists(), (out, err)
