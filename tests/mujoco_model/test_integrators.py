"""integrators.py: MuJoCo's steps (Euler with implicit joint damping, implicitfast, RK4 on the rotation
group) on the NumPy forward and reference solve equal mj_step (Newton run to 1e-15): one step from
MuJoCo's own state at every step, and free-running; and what mujoco.rollout.rollout records."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model.forward import ForwardModel
from casadi_delassus.mujoco_model.integrators import Integrator, State, integrate_pos
from casadi_delassus.mujoco_model.model import MujocoModel

from .common import load, mujoco, mujoco_contacts


def run(name, integrator, cone, steps, seed=3):
    """(worst one-step error, worst free-running error, contacts seen) over ``steps`` steps under
    sinusoidal controls from a random velocity, errors relative to max(1, |state|)."""
    m = load(name, cone, integrator)
    stepper = Integrator(ForwardModel(MujocoModel(m)), mujoco_contacts(m))
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    d.qvel[:] = rng.normal(size=m.nv) * 0.5
    if m.jnt_type[0] == 0:
        d.qpos[2] = 0.25
    free, one, alone, contacts = None, 0.0, 0.0, 0
    for t in range(steps):
        d.ctrl[:] = np.sin(0.05 * t + np.arange(m.nu))
        now = State(d.time, d.qpos.copy(), d.qvel.copy(), d.qacc_warmstart.copy())
        nxt, _ = stepper.step(now, d.ctrl.copy())
        free, _ = stepper.step(free or now, d.ctrl.copy())
        mujoco.mj_step(m, d)
        ref = np.concatenate([[d.time], d.qpos, d.qvel])
        scale = max(1.0, np.abs(ref).max())
        one = max(one, np.abs(nxt.full_physics() - ref).max() / scale)
        alone = max(alone, np.abs(free.full_physics() - ref).max() / scale)
        contacts += d.ncon
    return one, alone, contacts


@pytest.mark.parametrize("integrator", ["euler", "implicitfast", "rk4"])
def test_steps_equal_mj_step(integrator):
    """The rig (free, ball, hinge and slide joints, dampers, springs, limits, friction loss, equality,
    actuators with kv terms and force clamps) falling onto the floor."""
    one, alone, contacts = run("mjcf_rig", integrator, "pyramidal", 25)
    assert contacts > 0 and one < 1e-9 and alone < 1e-9, (one, alone)


def test_elliptic_steps_equal_mj_step():
    one, alone, contacts = run("mjcf_rig", "euler", "elliptic", 25)
    assert contacts > 0 and one < 1e-8 and alone < 1e-8, (one, alone)


def test_rk4_combines_rotations_on_the_group(monkeypatch):
    """A torque-free spinning box: mj_step's quaternion equals the stages' dexp⁻¹-corrected
    increments (lie_correction) bit for bit; the plain weighted sum of the stages' qvel is off by 2e-8."""
    from casadi_delassus.mujoco_model import integrators
    m = mujoco.MjModel.from_xml_string('<mujoco><option gravity="0 0 0" integrator="RK4"/><worldbody><body>'
                                       '<freejoint/><geom type="box" size=".1 .2 .3"/></body></worldbody></mujoco>')
    d = mujoco.MjData(m)
    d.qvel[:] = [0.7, 1.4, 2.1, 2.8, 3.5, 4.2]
    start = State(0.0, d.qpos.copy(), d.qvel.copy(), np.zeros(m.nv))
    stepper = Integrator(ForwardModel(MujocoModel(m)), lambda qpos: [])
    nxt, _ = stepper.step(start)
    monkeypatch.setattr(integrators, "lie_correction", lambda m, theta, v: np.array(v, float))
    plain, _ = stepper.step(start)
    mujoco.mj_step(m, d)
    assert np.abs(nxt.qpos - d.qpos).max() < 1e-16 and np.abs(plain.qpos - d.qpos).max() > 1e-8


def test_integrate_pos_equals_mujoco():
    m = load("mjcf_ball_creature")
    rng = np.random.default_rng(0)
    for h in (1e-3, 0.1, 1.0):
        q = rng.normal(size=m.nq)
        v = rng.normal(size=m.nv)
        ref = q.copy()
        mujoco.mj_integratePos(m, ref, v, h)
        assert np.abs(integrate_pos(m, q, v, h) - ref).max() < 1e-15


def test_rollout_records_the_state_after_each_step_and_the_sensors_before_it():
    """mujoco.rollout's state[t] is [time, qpos, qvel] after step t (mjSTATE_FULLPHYSICS, nothing
    else for these models) and sensordata[t] the sensors mj_step's forward computed before it."""
    from mujoco import rollout
    m = load("mjcf_rig", tight=False)
    full = mujoco.mjtState.mjSTATE_FULLPHYSICS
    assert mujoco.mj_stateSize(m, full) == 1 + m.nq + m.nv
    d = mujoco.MjData(m)
    s0 = np.zeros(mujoco.mj_stateSize(m, full))
    mujoco.mj_getState(m, d, s0, full)
    ctrl = np.random.default_rng(0).uniform(-1, 1, (4, m.nu))
    state, sensordata = rollout.rollout(m, mujoco.MjData(m), s0, ctrl)
    for t in range(4):
        d.ctrl[:] = ctrl[t]
        mujoco.mj_forward(m, d)
        before = d.sensordata.copy()
        mujoco.mj_step(m, d)
        assert np.array_equal(state[0, t], np.concatenate([[d.time], d.qpos, d.qvel]))
        assert np.array_equal(sensordata[0, t], before)


@pytest.mark.slow
@pytest.mark.parametrize("integrator", ["euler", "implicitfast", "rk4"])
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_long_runs_equal_mj_step(integrator, cone):
    one, alone, contacts = run("mjcf_rig", integrator, cone, 120)
    assert contacts > 0 and one < 1e-8 and alone < 1e-7, (one, alone)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ant", "hopper", "mjcf_equality", "mjcf_ball_creature"])
def test_small_models_run_as_mj_step(name):
    m = load(name)
    integrator = {0: "euler", 1: "rk4", 3: "implicitfast"}[int(m.opt.integrator)]
    one, alone, _ = run(name, integrator, None, 120)
    assert one < 1e-9 and alone < 1e-8, (one, alone)
