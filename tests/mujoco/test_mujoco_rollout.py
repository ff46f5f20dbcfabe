"""cd.mujoco_rollout (casadi_delassus/mujoco/) against mujoco.rollout.rollout itself: the states of many steps
equal (qpos to 1e-6 absolute, qvel to 1e-5 relative) with MuJoCo's solver set to Newton at a tight tolerance (the
convex problem's answer is unique; MuJoCo's defaults stop earlier and differ by their tolerance), and bad input
refused in one line.  (No tests/mujoco/__init__.py: a package called ``mujoco`` would hide MuJoCo itself.)"""
import warnings

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.errors import InputError, ModelError

mujoco = pytest.importorskip("mujoco")
from mujoco import rollout as mj_rollout  # noqa: E402

from casadi_delassus.codegen.mujoco_rollout import build  # noqa: E402
from casadi_delassus.mujoco_model import collision  # noqa: E402
from casadi_delassus.mujoco_model.model import MujocoModel  # noqa: E402
from casadi_delassus.mujoco.rollout import _warn as warn, fingerprint, rollout_status  # noqa: E402
from casadi_delassus.mujoco_model.rollout_parts import c_slots, rollout_parts  # noqa: E402
from casadi_delassus.runtime.mujoco_rollout import CompiledRollout  # noqa: E402
from mujoco_model.common import load, path_of  # noqa: E402
from mujoco_model.mj_scenes import installed, drop_each, dropped_states, gymnasium_model, random_qpos, robosuite_model  # noqa: E402

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS


def tight(m):
    """MuJoCo's Newton solver run to 1e-15 (its answer is then the problem's unique one)."""
    m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = 1e-15, 1000, 200
    return m


def rig(keep_sensors=False, couple=None):
    """tests/models/mjcf_rig.xml without its sensors (``keep_sensors``: without its touch sensors) and with contacts
    against the floor only (the compiled rollout refuses touch sensors and body-body sphere-box pairs by name): free,
    ball, hinge and slide joints, limits, friction loss, equality, actuators with ranges, condim 1/3/4/6 contacts
    (pyramidal), Euler with implicit damping.  ``couple``: the joint the knee's joint equality couples (the hip)."""
    spec = mujoco.MjSpec.from_file(str(path_of("mjcf_rig")))
    if couple:
        next(e for e in spec.equalities if e.name == "couple").name2 = couple
    for s in list(spec.sensors):
        if not keep_sensors or s.type == mujoco.mjtSensor.mjSENS_TOUCH:
            spec.delete(s)
    for g in spec.geoms:
        if g.name != "floor":
            g.conaffinity = 0
    m = spec.compile()
    m.opt.disableactuator = 1 << 3
    return tight(m)


def start(m, n, seed, drop=(0.0, 0.3)):
    """n initial FULLPHYSICS states: qpos0 with the free bodies lowered by ``drop`` metres, random qvel."""
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    out = np.zeros((n, mujoco.mj_stateSize(m, FULL)))
    for b in range(n):
        mujoco.mj_resetData(m, d)
        d.qvel[:] = rng.normal(size=m.nv) * 0.3
        if m.jnt_type[0] == 0:
            d.qpos[2] -= rng.uniform(*drop)
        mujoco.mj_getState(m, d, out[b], FULL)
    return out


def above_floor(m, n, seed):
    """n states at qpos0, zero velocity, the robot's lowest geom point 0-2 cm above the floor (z = 0)."""
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    mujoco.mj_forward(m, d)
    robot = m.geom_bodyid > 0
    R = d.geom_xmat.reshape(-1, 3, 3)
    low = d.geom_xpos[:, 2] + np.einsum("gk,gk->g", R[:, 2, :], m.geom_aabb[:, :3])
    low -= np.einsum("gk,gk->g", np.abs(R[:, 2, :]), m.geom_aabb[:, 3:])
    out = np.zeros((n, mujoco.mj_stateSize(m, FULL)))
    for b in range(n):
        mujoco.mj_resetData(m, d)
        d.qpos[2] += rng.uniform(0.0, 0.02) - low[robot].min()
        mujoco.mj_getState(m, d, out[b], FULL)
    return out


def controls(m, n, steps, amplitude=2.0):
    """Sinusoids of ``amplitude`` times the control ranges (beyond them: MuJoCo clamps)."""
    t = np.arange(steps)[None, :, None]
    span = np.where(m.actuator_ctrllimited, np.abs(m.actuator_ctrlrange).max(axis=1), 1.0)
    return amplitude * span * np.sin(0.05 * t + np.arange(m.nu)[None, None, :] + np.arange(n)[:, None, None])


def errors(m, ours, ref):
    """(max qpos error, max relative qvel error) of two state arrays."""
    q, v = slice(1, 1 + m.nq), slice(1 + m.nq, 1 + m.nq + m.nv)
    dq = np.abs(ours[..., q] - ref[..., q]).max()
    dv = (np.abs(ours[..., v] - ref[..., v]) / np.maximum(1.0, np.abs(ref[..., v]))).max()
    return dq, dv


def contacts_seen(m, x0, u):
    """Whether MuJoCo's own trajectory of environment 0 has contacts."""
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, x0[0], FULL)
    seen = 0
    for ctrl in u[0]:
        d.ctrl[:] = ctrl
        mujoco.mj_step(m, d)
        seen += d.ncon
    return seen > 0


@pytest.fixture(scope="module")
def rig_model():
    return rig()


@pytest.fixture(scope="module")
def rig_out(tmp_path_factory):
    """One build folder for the tests of the plain rig: it is compiled once for them all (a changed model still is
    another content there, compiled anew)."""
    return tmp_path_factory.mktemp("mj")


def test_rig_states_equal_mujoco_rollout(rig_model, rig_out):
    m = rig_model
    out = rig_out
    x0, u = start(m, 4, 1), controls(m, 4, 400)
    data = [mujoco.MjData(m) for _ in range(2)]
    ours, sensors = cd.mujoco_rollout(m, data, x0, u, out_dir=out)
    one, _ = cd.mujoco_rollout(m, data[0], x0, u, out_dir=out)
    ref, ref_sensors = mj_rollout.rollout(m, data, x0, u)
    assert ours.shape == ref.shape and sensors.shape == ref_sensors.shape
    assert contacts_seen(m, x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)
    assert np.array_equal(one, ours)                    # threads change nothing


@pytest.mark.parametrize("option, value, seed", [("cone", mujoco.mjtCone.mjCONE_ELLIPTIC, 7),
                                                  ("integrator", mujoco.mjtIntegrator.mjINT_RK4, 8),
                                                  ("integrator", mujoco.mjtIntegrator.mjINT_IMPLICITFAST, 10)])
def test_rig_variants_equal_mujoco_rollout(tmp_path, option, value, seed):
    """The rig with MuJoCo's elliptic cone (condim 3, 4 and 6 contacts: the cone's surface, top and bottom zones), and
    with RK4 (four full forwards per step, rotations combined on the group), and with implicitfast (dampers and
    the position/velocity actuators' kv terms implicit)."""
    m = rig()
    setattr(m.opt, option, value)
    x0, u = start(m, 3, seed), controls(m, 3, 300)
    ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    assert contacts_seen(m, x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


def test_cross_branch_equality_equals_mujoco_rollout(tmp_path):
    """The rig with its joint equality coupling the knee (leg) to the elbow (arm): that row's columns lie on two
    branches of the dof tree, so the Newton Hessian loses M's tree sparsity and the solve takes that row by the
    Woodbury identity on the tree factor of the rest (the tree factor alone drops the knee-elbow entry: its solves
    then stop at the iteration limit, with a warning)."""
    m = rig(couple="elbow")
    x0, u = start(m, 3, 11), controls(m, 3, 300)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


def test_sensordata_equals_mujoco_rollout(tmp_path):
    """The rig's sensors but touch (joint, frame, subtree, gyro, accelerometer, velocimeter, with cutoffs): sensordata
    at each step's first forward, as mujoco.rollout records it."""
    m = rig(keep_sensors=True)
    x0, u = start(m, 3, 9), controls(m, 3, 200)
    sensordata = np.zeros((3, 200, m.nsensordata))
    ours, sens = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, sensordata=sensordata, out_dir=tmp_path)
    ref, ref_sens = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    assert sens is sensordata and m.nsensordata > 20
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)
    err = np.abs(sens - ref_sens) / np.maximum(1.0, np.abs(ref_sens))
    assert err.max() <= 1e-6, err.max()


def test_singleton_expansion_and_output_arrays(rig_model, rig_out):
    """One initial state and one control row tile over nbatch and nstep as MuJoCo tiles them; a given ``state``
    array is written."""
    m = rig_model
    out = rig_out
    x0, u = start(m, 1, 2), controls(m, 3, 1)[:, :1]
    state = np.empty((3, 50, x0.shape[1]))
    ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, nstep=50, state=state, out_dir=out)
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u, nstep=50)
    assert ours is state
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5


def test_changed_model_is_compiled_anew(rig_model, rig_out):
    """A model changed after its first call is another content: compiled again, and still MuJoCo's answer."""
    m = rig()
    out = rig_out
    x0, u = start(m, 2, 3), controls(m, 2, 60)
    cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=out)
    m.opt.gravity[:] = [0.0, 0.5, -3.0]
    ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=out)
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5


def test_visual_meshes_are_not_in_the_fingerprint():
    """The fingerprint reads the meshes only where a mesh geom can collide: with every mesh geom's contype and
    conaffinity 0 (visual meshes, as Go2's), a moved vertex keeps it; a collidable mesh geom (a conaffinity, or an
    explicit pair) brings the hulls back in, so the same moved vertex changes it."""
    m = mesh_box()
    meshes = np.flatnonzero(m.geom_type == mujoco.mjtGeom.mjGEOM_MESH)
    m.geom_contype[meshes] = m.geom_conaffinity[meshes] = 0
    visual = fingerprint(m)
    m.mesh_vert[m.mesh_vertadr[0]] *= 0.9
    assert fingerprint(m) == visual
    m.geom_conaffinity[meshes[0]] = 1
    collidable = fingerprint(m)
    m.mesh_vert[m.mesh_vertadr[0]] /= 0.9
    assert len({visual, collidable, fingerprint(m)}) == 3


def test_a_changed_hull_is_another_content(tmp_path):
    """The compiled rollout reads the meshes' hulls (vertices, polygons): moving one vertex or turning one polygon's
    normal after the first call gives the model another fingerprint, hence its own build, and MuJoCo's answer."""
    m = mesh_box()
    x0, u = start(m, 2, 4, drop=(0.0, 0.1)), controls(m, 2, 200)
    cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=tmp_path)
    before = fingerprint(m)
    m.mesh_polynormal[3] *= -1
    turned = fingerprint(m)
    m.mesh_polynormal[3] *= -1
    m.mesh_vert[m.mesh_vertadr[0]] *= 0.9                # a brick's corner in (within its bounding sphere)
    assert len({before, turned, fingerprint(m)}) == 3
    ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


def diverging(m, n, steps, env, at):
    """Controls ctrl | qfrc_applied: the rig's sinusoids, and on environment ``env`` from step ``at`` a qfrc_applied of
    1e13 (its qacc beyond MuJoCo's 1e10: divergence)."""
    u = np.concatenate([controls(m, n, steps), np.zeros((n, steps, m.nv))], axis=2)
    u[env, at:, m.nu:] = 1e13
    return u


@pytest.mark.parametrize("lanes, integrator", [(2, None), ("auto", mujoco.mjtIntegrator.mjINT_RK4)])
def test_lanes_equal_the_scalar_rollout(rig_model, rig_out, lanes, integrator):
    """SIMD lane groups (issue 33) against the scalar rollout on the rig, Euler and RK4 (its stages in lockstep): 5
    environments (a ragged last group), environment 2 diverging at step 40 (then its rows repeat its last state, the
    others go on): the same statuses and diverged rows, the states within rounding of the scalar's (the vector kernel's
    multiply-adds contract otherwise: 1.7e-12 over 150 steps measured) and within the tolerances of mujoco.rollout's; a
    lane's states bit for bit whatever the other lanes (alone, on two threads)."""
    m = rig_model if integrator is None else rig()
    if integrator is not None:
        m.opt.integrator = integrator
    spec = int(mujoco.mjtState.mjSTATE_CTRL | mujoco.mjtState.mjSTATE_QFRC_APPLIED)
    x0, u = start(m, 5, 6), diverging(m, 5, 150, 2, 40)
    data = [mujoco.MjData(m) for _ in range(2)]
    kw = dict(control_spec=spec, out_dir=rig_out)
    with pytest.warns(RuntimeWarning, match=r"trajectories \[2\] diverged"):
        scalar, sens, status = rollout_status(m, data[0], x0, u, report=warn, **kw)
        ours, our_sens, our_status = rollout_status(m, data[0], x0, u, report=warn, lanes=lanes, **kw)
        two, _, _ = rollout_status(m, data, x0, u, report=warn, lanes=lanes, **kw)
    assert status.tolist() == our_status.tolist() == [0, 0, 2, 0, 0]
    assert np.array_equal(ours[2, 41:], np.broadcast_to(ours[2, 40], ours[2, 41:].shape))
    assert np.array_equal(scalar[2, 40:, 0], ours[2, 40:, 0])
    dq, dv = errors(m, ours, scalar)
    assert dq <= 1e-9 and dv <= 1e-9 and np.abs(our_sens - sens).max(initial=0) <= 1e-8, (dq, dv)
    running = [0, 1, 3, 4]
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0[running], u[running], control_spec=spec)
    dq, dv = errors(m, ours[running], ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)
    alone, _, _ = rollout_status(m, data[0], x0[3:4], u[3:4], lanes=lanes, **kw)
    assert np.array_equal(two, ours) and np.array_equal(alone[0], ours[3])


def test_lanes_option_checked_and_in_the_key(rig_model, rig_out):
    """lanes: 1, "auto" or a power of two up to 16, anything else refused in one line before any build; each lane count
    is its own build (the cache key carries it) whose library reports its lane groups."""
    m = rig_model
    x0, u = start(m, 1, 2), controls(m, 1, 3)
    for bad in (3, 0, 32, True, "two", 2.0):
        with pytest.raises(InputError, match="lanes") as info:
            cd.mujoco_rollout(m, mujoco.MjData(m), x0, u, out_dir=rig_out, lanes=bad)
        assert "\n" not in str(info.value)
    paths = {lanes: build(MujocoModel(m), rollout_parts, rig_out, lanes=lanes) for lanes in (1, 2)}
    assert paths[1] != paths[2]
    assert [CompiledRollout(paths[k]).lanes for k in (1, 2)] == [1, 2]


@pytest.mark.parametrize("case, message", [
    ("short state", "initial_state"), ("nan state", "non-finite"), ("control size", "control"),
    ("two models", "different content"), ("xfrc spec", "xfrc_applied"), ("data", "MjData"), ("nstep", "nstep")])
def test_bad_input_is_one_line(rig_model, rig_out, case, message):
    m = rig_model
    out = rig_out
    x0, u, d = start(m, 2, 4), controls(m, 2, 5), mujoco.MjData(m)
    other = rig()
    other.opt.timestep = 0.002
    call = {"short state": lambda: cd.mujoco_rollout(m, d, x0[:, :-1], u, out_dir=out),
            "nan state": lambda: cd.mujoco_rollout(m, d, np.where(np.arange(x0.shape[1]) == 3, np.nan, x0), u, out_dir=out),
            "control size": lambda: cd.mujoco_rollout(m, d, x0, u[..., :-1], out_dir=out),
            "two models": lambda: cd.mujoco_rollout([m, other], d, x0, u, out_dir=out),
            "xfrc spec": lambda: cd.mujoco_rollout(m, d, x0, None, control_spec=mujoco.mjtState.mjSTATE_XFRC_APPLIED,
                                                   nstep=3, out_dir=out),
            "data": lambda: cd.mujoco_rollout(m, "data", x0, u, out_dir=out),
            "nstep": lambda: cd.mujoco_rollout(m, d, x0, u, nstep=-1, out_dir=out)}[case]
    with pytest.raises(InputError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("change, name", [("integrator", "the implicit integrator"),
                                           ("sensors", "touch sensors")])
def test_unsupported_model_refused_by_name(tmp_path, change, name):
    m = rig() if change != "sensors" else tight(load("mjcf_rig"))
    if change == "integrator":
        m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICIT
    with pytest.raises(ModelError, match=name) as info:
        cd.mujoco_rollout(m, mujoco.MjData(m), start(m, 1, 0), controls(m, 1, 2), out_dir=tmp_path)
    assert "\n" not in str(info.value)


def go2(cone=None):
    """robosuite-models' Go2 on a floor added as Menagerie's scene.xml adds it (floor contacts only), gravity on,
    Euler; ``cone`` "pyramidal" replaces the file's elliptic cone."""
    m = tight(robosuite_model("go2"))
    m.opt.gravity[:] = [0, 0, -9.81]                    # Go2's file sets none: Menagerie's scene does
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    if cone:
        m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    return m


@pytest.mark.slow
@pytest.mark.parametrize("cone, steps", [("pyramidal", 1000), (None, 400)])
def test_go2_floor_equals_mujoco_rollout(tmp_path, cone, steps):
    """Go2, 8 environments dropped 0-2 cm under sinusoidal controls.  With the file's elliptic cone and impratio 100
    MuJoCo's own Newton (tolerance 1e-15) stops with efc_force 2e-7 (relative) from the converged answer at its worst
    state (our C equals the NumPy reference solve there to 1e-12): the difference doubles every ~50 steps past
    step 500 and reaches 1.4e-6 in qpos by step 1,000, so that case is checked over 400 steps."""
    m = go2(cone)
    x0, u = above_floor(m, 8, 5), controls(m, 8, steps, amplitude=0.5)
    ours, _ = cd.mujoco_rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u)
    assert contacts_seen(m, x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


def humanoid(name):
    """robosuite-models' G1 or H1 on a floor added as Menagerie's scene.xml adds it (floor contacts only: their mesh
    pairs between bodies are refused), gravity on, Euler, the file's pyramidal cone, MuJoCo at Newton 1e-15."""
    m = tight(robosuite_model(name))
    m.opt.gravity[:] = [0, 0, -9.81]
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    return m


@pytest.mark.slow
@pytest.mark.parametrize("name, steps, amplitude", [("h1", 1000, 0.005), ("g1", 200, 0.01)])
def test_g1_h1_floors_equal_mujoco_rollout(tmp_path, name, steps, amplitude):
    """G1 and H1 (their feet, legs and torso meshes against the floor through their hulls), 8 environments dropped
    0-2 cm under sinusoidal torques.  Their motors' ranges (H1 ±20,000 and ±2,000 N·m, G1's arms ±1,000) make half
    of them throw the robots apart within 10 ms in MuJoCo itself: the torques here are 100 N·m (H1's legs) and 10 N·m
    (the arms) at most.  G1 is checked over 200 steps: under these torques its motion is chaotic, MuJoCo's own
    rollout from a qvel changed by 1e-13 parts from MuJoCo's at the rate ours does (5e-10 in qpos by step 200, 5e-7
    by 300, 2e-5 by 375, x10 every ~25 steps; docs/mujoco.md): at 300 steps ours measured 1.8e-7 and 4.5e-6 against
    the bounds 1e-6 and 1e-5, too close for another machine's rounding."""
    m = humanoid(name)
    x0, u = above_floor(m, 8, 5), controls(m, 8, steps, amplitude=amplitude)
    ours, _ = cd.mujoco_rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u)
    assert contacts_seen(m, x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)



def random_velocity_errors(m, steps, tmp_path):
    """errors() of ours against MuJoCo's rollout: 8 environments from qpos0 with random velocities, ``steps`` steps
    of sinusoidal controls, two threads."""
    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    x0 = np.zeros((8, mujoco.mj_stateSize(m, FULL)))
    for b in range(8):
        mujoco.mj_resetData(m, d)
        d.qvel[:] = rng.normal(size=m.nv) * 0.1
        mujoco.mj_getState(m, d, x0[b], FULL)
    u = controls(m, 8, steps, amplitude=0.5)
    ours, _ = cd.mujoco_rollout(m, [d, mujoco.MjData(m)], x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, [d, mujoco.MjData(m)], x0, u)
    return errors(m, ours, ref)


def humanoid_elliptic():
    """Gymnasium's humanoid with MuJoCo's elliptic cone and condim 3 on every geom: its body-body contacts between
    two limbs can slide on the cone's surface, whose Hessian block is not diagonal."""
    spec = mujoco.MjSpec.from_file(str(installed("gymnasium", "gymnasium/envs/mujoco/assets/humanoid.xml")))
    for g in spec.geoms:
        g.condim = 3
    m = tight(spec.compile())
    m.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    return m


@pytest.mark.slow
def test_humanoid_elliptic_cross_branch_equals_mujoco_rollout(tmp_path):
    """humanoid_elliptic, 8 environments of 300 steps: a Newton Hessian with a cone's surface across two branches
    is factored densely (the Woodbury route takes diagonal blocks only; with that solve's result zeroed the states
    part from MuJoCo's by 2.6 in qpos); the states equal MuJoCo's (measured: 2.7e-10 in qpos, 4.8e-9 in qvel)."""
    m = humanoid_elliptic()
    dq, dv = random_velocity_errors(m, 300, tmp_path)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hopper", "walker2d_v5", "humanoid"])
def test_gymnasium_equals_mujoco_rollout(tmp_path, name):
    """Gymnasium's models as shipped (RK4; humanoid's body-body capsule contacts), MuJoCo at Newton 1e-15:
    8 environments from qpos0 with random velocities, 1,000 steps of sinusoidal controls.  (ant is left out: under
    these controls its states part from MuJoCo's exponentially from 1e-15 at the first steps, x10 every ~40 steps,
    the chaos of its motion, not a model difference: docs/mujoco.md.)"""
    m = tight(gymnasium_model(name))
    dq, dv = random_velocity_errors(m, 1000, tmp_path)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)


def mesh_box(cone=None):
    """tests/models/mjcf_mesh_box.xml (box, hexagonal prism and tetrahedron meshes on a floor, a hinged mesh flap and
    a sphere) at MuJoCo's Newton 1e-15; ``cone`` "elliptic" replaces the pyramidal one."""
    m = tight(load("mjcf_mesh_box"))
    if cone:
        m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    return m


def _mujoco_order(layout, on):
    """The kept C slots ``on`` in MuJoCo's contact order (pair by pair) and whether each is a mesh pair's."""
    order = [(s, ps.rule == "mesh") for ps, (first, n) in zip(layout.pairs, c_slots(layout))
             for s in range(first, first + n) if s in set(on.tolist())]
    return [s for s, _ in order], np.array([mesh for _, mesh in order], bool)


def forward_agreement(m, compiled, Q, rng):
    """The compiled C's one forward (``_forward``) against mj_forward at the states Q (random qvel and ctrl): the
    largest differences of the mesh contacts' positions, frames and dist (m) and of efc_J, efc_aref, efc_R,
    efc_force and qacc (relative), and the numbers of mesh contacts and rows compared.  MuJoCo's Newton on the
    elliptic cone stops early at some states even at tolerance 1e-15 (its gradient at 1e-8, efc_force 1e-9-5e-8
    from the converged answer): mj_forward is run again from its own qacc (qacc_warmstart) until it has converged."""
    layout, d = collision.contact_layout(m), mujoco.MjData(m)
    worst, meshes, nefc = dict.fromkeys(("pos", "frame", "dist", "J", "aref", "R", "force", "qacc"), 0.0), 0, 0
    for q in Q:
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, rng.normal(size=m.nv) * 0.3, rng.uniform(-1, 1, m.nu)
        mujoco.mj_forward(m, d)
        for _ in range(5):
            d.qacc_warmstart[:] = d.qacc
            mujoco.mj_forward(m, d)
        ours = compiled.forward(d.qpos, d.qvel, d.ctrl, np.zeros(m.nv))
        order, mesh = _mujoco_order(layout, ours["on"])
        assert ours["status"] == 0 and len(order) == d.ncon and len(ours["kept"]) == d.nefc
        meshes, nefc = meshes + int(mesh.sum()), nefc + d.nefc
        if d.ncon:
            assert [tuple(layout_geoms(layout, s)) for s in order] == [tuple(g) for g in d.contact.geom]
            worst["dist"] = max(worst["dist"], np.abs(ours["dist"][order] - d.contact.dist).max())
            for k in ("pos", "frame"):
                worst[k] = max(worst[k], np.abs(ours[k][order][mesh] - getattr(d.contact, k)[mesh]).max(initial=0))
        if d.nefc:
            J = d.efc_J.reshape(d.nefc, m.nv)
            worst["J"] = max(worst["J"], np.abs(ours["J"] - J).max() / np.abs(J).max())
            for k, ref in (("aref", d.efc_aref), ("R", d.efc_R), ("force", d.efc_force)):
                worst[k] = max(worst[k], np.abs(ours[k] - ref).max() / max(1e-300, np.abs(ref).max()))
        worst["qacc"] = max(worst["qacc"], np.abs(ours["qacc"] - d.qacc).max() / max(1.0, np.abs(d.qacc).max()))
    return {k: float(x) for k, x in worst.items()}, meshes, nefc


def layout_geoms(layout, s):
    """(geom1, geom2) of the pair that owns C slot s."""
    for ps, (first, n) in zip(layout.pairs, c_slots(layout)):
        if first <= s < first + n:
            return ps.pair.geom1, ps.pair.geom2
    raise AssertionError(s)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_mesh_contacts_one_forward_equal_mj_forward(tmp_path, cone):
    """Plane-mesh contacts of the compiled C (the hull's support vertex and its polygon's quadrilateral, mesh_box's
    four meshes) against mj_forward at 150 random states with the bodies dropped 2 cm into to 1 cm above the floor in
    any orientation, and 60 with them upright or turned half a turn about a world axis (faces resting flat: tied
    vertices, MuJoCo's choice among them decides the corners): the same contacts (geom pairs, count, MuJoCo's order),
    positions, frames and dist (to 1e-12), and the constraint rows efc_J, efc_aref, efc_R, efc_force and qacc (to
    1e-9 relative)."""
    m = mesh_box(cone)
    compiled = CompiledRollout(build(MujocoModel(m), rollout_parts, tmp_path))
    rng = np.random.default_rng(1)
    flat = random_qpos(m, 60, rng)
    turns = np.eye(4)[rng.integers(0, 4, (60, 3))]
    for b, joint in enumerate(j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE):
        flat[:, m.jnt_qposadr[joint] + 3:m.jnt_qposadr[joint] + 7] = turns[:, b]
    Q = drop_each(m, collision.contact_layout(m), np.r_[random_qpos(m, 150, rng), flat], rng)
    worst, meshes, nefc = forward_agreement(m, compiled, Q, rng)
    assert meshes > 400 and nefc > 1000, (meshes, nefc)
    assert max(worst[k] for k in ("pos", "frame", "dist")) <= 1e-12, worst
    assert max(worst[k] for k in ("J", "aref", "R", "force", "qacc")) <= 1e-9, worst


@pytest.mark.slow
@pytest.mark.parametrize("name", ["g1", "h1"])
def test_g1_h1_contacts_one_forward_equal_mj_forward(tmp_path, name):
    """The same on G1 and H1 at 60 random states each (joints anywhere in their ranges, the robot lowered until its
    lowest floor candidate is 2 cm into to 1 cm above the floor): their hulls of 129-5,365 vertices."""
    m = humanoid(name)
    compiled = CompiledRollout(build(MujocoModel(m), rollout_parts, tmp_path))
    rng = np.random.default_rng(4)
    worst, meshes, nefc = forward_agreement(m, compiled, dropped_states(m, collision.contact_layout(m), 60, rng), rng)
    print(f"\n{name}: {meshes} mesh contacts, {nefc} rows; largest differences {worst}")
    assert meshes > 60 and nefc > 200, (meshes, nefc)
    assert max(worst[k] for k in ("pos", "frame", "dist")) <= 1e-12, worst
    assert max(worst[k] for k in ("J", "aref", "R", "force", "qacc")) <= 1e-9, worst


def test_mesh_box_states_equal_mujoco_rollout(tmp_path):
    """mesh_box's meshes dropped from 0-30 cm, tumbling and landing on their faces and edges (flat faces resting on
    the floor: the polygons' quadrilaterals carry them), under a sinusoidal hinge motor: 4 environments x 500
    steps."""
    m = mesh_box()
    x0, u = start(m, 4, 12, drop=(0.0, 0.1)), controls(m, 4, 500)
    ours, _ = cd.mujoco_rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u, out_dir=tmp_path)
    ref, _ = mj_rollout.rollout(m, [mujoco.MjData(m), mujoco.MjData(m)], x0, u)
    assert contacts_seen(m, x0, u)
    dq, dv = errors(m, ours, ref)
    assert dq <= 1e-6 and dv <= 1e-5, (dq, dv)
