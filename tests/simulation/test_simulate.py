"""The time-stepping loop (simulation/simulate.py): kinematics of the candidates against the NumPy
reference, free fall against semi-implicit Euler in closed form and against MuJoCo's mj_step
(MJCF), a box on a tilted plane (sticking and sliding as Coulomb says), a robot at rest, a
drop, every stopping status, and the CSV / figure outputs.  Rollouts are short and use the
NumPy reference step (simulation/reference_step.py), which needs no compiler."""
import csv

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.simulation import simulate as sim
from casadi_delassus.simulation.reference_step import reference_steps
from casadi_delassus.simulation.rollout_io import plot, write_csv
from casadi_delassus.errors import InputError
from casadi_delassus.verify import reference
from cli_runner import run_cli
from conftest import BOX, BOX_CORNERS as CORNERS, TEST_CFLAGS, tilted_box

G = 9.81
FEET = [f"{leg}_foot@-0.0173782,0,-0.0098993" for leg in ("FL", "FR", "RL", "RR")]


@pytest.fixture(scope="module")
def go1():
    return cd.load_robot("go1")


@pytest.fixture(scope="module")
def box():
    return cd.load_robot(BOX)


def _box_on(normal, theta):
    """The box's q resting on the plane through the origin with this normal (turned by θ about y)."""
    q = np.zeros(7)
    q[3:7] = (0.0, np.sin(theta / 2), 0.0, np.cos(theta / 2))
    q[:3] = 0.05 * np.asarray(normal)
    return q


def test_candidate_positions_match_reference(go1):
    """World positions of points (and gaps of spheres against a tilted ground) from the SX
    kinematics equal the NumPy reference's body transforms at random q."""
    rng = np.random.default_rng(1)
    n = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])      # a unit normal: others are refused
    scene = sim.Scene(go1, FEET + ["FL_calf@0.01,0.02,-0.1/0.03"], normal=n, height=0.1)
    for _ in range(5):
        q = go1.perturbed_q(go1.neutral_q(), 0.7, rng)
        q[:3] = rng.normal(size=3)
        q[3:7] = rng.normal(size=4) / 1.0
        q[3:7] /= np.linalg.norm(q[3:7])
        want = []
        for c in scene.candidates:
            X = reference.world_transform(go1, q, c.body)
            want.append(reference._origin(X) + X[:3, :3].T @ c.point)
        want = np.array(want)
        assert np.abs(scene.positions(q) - want).max() < 1e-12
        radii = np.array([0, 0, 0, 0, 0.03])
        assert np.abs(scene.gaps(q) - (want @ n - 0.1 - radii)).max() < 1e-12


def test_free_fall_is_semi_implicit_euler(go1):
    """Far above the ground: every step "free", the base height h₀ − g dt² k(k+1)/2 exactly."""
    q0 = go1.neutral_q()
    q0[2] = 2.0
    r = cd.simulate(go1, FEET, q0, np.zeros(go1.nv), 0.05, 1e-3)
    k = np.arange(51)
    assert r.statuses == [sim.FREE] * 50 and r.completed
    assert np.abs(r.base_height() - (2.0 - G * 1e-6 * k * (k + 1) / 2)).max() < 1e-12


def test_mjcf_free_fall_matches_mujoco(tmp_path):
    """An MJCF body spinning and falling: our loop's q (mj_integratePos convention, MuJoCo's
    quaternion order) equals mj_step with the semi-implicit Euler integrator."""
    mujoco = pytest.importorskip("mujoco")
    xml = """<mujoco><option integrator="Euler" timestep="0.001"/><worldbody><body name="b" pos="0 0 1">
    <freejoint/><geom type="box" size=".1 .2 .3" mass="1" contype="0" conaffinity="0"/>
    <body name="arm" pos="0.1 0 0"><joint name="h" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3" contype="0" conaffinity="0"/></body>
    </body></worldbody></mujoco>"""
    path = tmp_path / "spin.xml"
    path.write_text(xml)
    robot = cd.load_robot(str(path))
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qvel[:] = [0.3, -0.2, 0.5, 1.0, -2.0, 3.0, 4.0]
    r = cd.simulate(robot, ["b@0,0,-0.3"], d.qpos.copy(), d.qvel.copy(), 0.1, 1e-3, step="reference")
    for _ in range(100):
        mujoco.mj_step(m, d)
    assert r.statuses[-1] == sim.FREE
    assert np.abs(r.q[-1] - d.qpos).max() < 1e-10 and np.abs(r.v[-1] - d.qvel).max() < 1e-10


@pytest.mark.parametrize("mu, slides", [(0.6, False), (0.3, True)])
def test_box_on_tilted_plane(box, mu, slides):
    """A box on a plane tilted by θ = 0.4 rad (tan θ = 0.42): at rest when μ > tan θ; else it
    slides with acceleration g (sin θ − μ cos θ) along the slope, per step to 1e-9."""
    theta = 0.4
    n = np.array([np.sin(theta), 0.0, np.cos(theta)])
    r = cd.simulate(box, CORNERS, _box_on(n, theta), np.zeros(6), 0.03, 1e-3, normal=n, mu=mu, step="reference")
    assert r.completed and set(r.statuses) == {sim.OK}
    down = np.array([np.cos(theta), 0.0, -np.sin(theta)])             # along the slope, downhill
    R = np.array([[np.cos(theta), 0, np.sin(theta)], [0, 1, 0], [-np.sin(theta), 0, np.cos(theta)]])
    speed = (r.v[:, :3] @ R.T) @ down                                    # local linear velocity to world
    a = max(G * (np.sin(theta) - mu * np.cos(theta)), 0.0)
    assert (a > 0) == slides
    assert np.abs(np.diff(speed) - a * 1e-3).max() < 1e-9
    assert np.abs(r.gaps).max() < 1e-9


def test_go1_at_rest_stays(go1, stand):
    """go1 standing under its balancing torque with zero velocity: no drift above 1e-9 m."""
    r = cd.simulate(go1, FEET, stand.q, np.zeros(go1.nv), 0.02, 1e-3, controller=lambda t, q, v: stand.tau,
                    step="reference", solver="admm")
    assert set(r.statuses) == {sim.OK}
    assert np.abs(r.q - stand.q).max() < 1e-9
    # warm started from the previous impulses: the later solves stop at once or after one iteration
    assert r.iterations[0] >= 5 and r.iterations[1:].max() <= 1     # cold: 5 iterations (admm.py, one rho jump)


def test_drop_lands_and_builds_one_step(go1, stand):
    """Dropped from 1 cm under a PD controller: free steps, then contact; one step is built, over every candidate,
    whatever the active sets seen (it was one per set: issue 35 point 3); forces on the ground are compressive."""
    q0 = stand.q.copy()
    q0[2] += 0.01
    scene = sim.Scene(go1, FEET)
    made = []
    factory = reference_steps()
    cache_factory = lambda *a: made.append(len(a[1])) or factory(*a)      # noqa: E731
    r = sim.run(scene, q0, np.zeros(go1.nv), 0.08, 1e-3, cd.pd_controller(go1, stand.q, 60.0, 2.0, stand.tau),
                cache_factory)
    assert r.completed and r.statuses[0] == sim.FREE and r.statuses[-1] == sim.OK
    assert len(set(map(tuple, r.gaps <= scene.margin))) > 2 and made == [len(FEET)]      # sets seen; one build
    assert r.forces[:, :, 2].min() >= 0 and r.forces[-1, :, 2].sum() > 0


def test_a_landing_on_the_compiled_step_builds_one_step(go1, stand, tmp_path):
    """go1 landing tilted, feet touching one by one under a plain-callable PD (the per-step loop): one compiled step
    in the build folder, whatever the active sets (issue 35 point 3: one per set before)."""
    scene = sim.Scene(go1, FEET)
    v0 = np.zeros(go1.nv)
    v0[3] = 0.5
    pd = cd.pd_controller(go1, stand.q, 60.0, 2.0, stand.tau)
    r = cd.simulate(go1, FEET, sim.place(scene, stand.q, 0.02), v0, 0.08, 1e-3, controller=lambda t, q, v: pd(t, q, v),
                    out_dir=tmp_path, cflags=TEST_CFLAGS, quiet=True)
    assert r.completed and len({tuple(m) for m in r.gaps <= scene.margin}) > 2
    assert len(list(tmp_path.rglob("contact_*.so"))) == 1


def _fake(status="converged"):
    """A step factory whose steps keep v and report ``status``."""
    return lambda robot, specs, mu, frame: (
        lambda q, v, tau, dt, lam0=None, gap=None, active=None: sim.StepResult(np.zeros(3 * len(specs)), np.zeros(3 * len(specs)), v,
                                                                  7, 0.5, status))


def test_stopping_statuses(go1, stand):
    """Each stopping status ends the rollout at the step it names, keeps what came before, and
    records the solver's iterations and residual when the solve failed."""
    v0 = np.zeros(go1.nv)
    scene = sim.Scene(go1, FEET)
    bad = v0.copy()
    bad[3] = np.nan
    r = sim.run(scene, stand.q, bad, 0.01, 1e-3, step_factory=_fake())
    assert r.statuses == [sim.NAN_STATE] and len(r.q) == 1 and not r.completed
    deep = stand.q.copy()
    deep[2] -= 1.5
    assert sim.run(scene, deep, v0, 0.01, 1e-3, step_factory=_fake()).statuses == [sim.FELL]
    growing = sim.run(scene, stand.q, v0, 0.01, 1e-3, lambda t, q, v: np.full(go1.nv, 10.0 ** (1e3 * t)),
                      _fake(), tau_limit=1e5)
    assert growing.statuses == [sim.OK] * 6 + [sim.CONTROLLER] and len(growing.q) == 7
    assert sim.run(scene, stand.q, v0, 0.01, 1e-3, lambda t, q, v: np.full(go1.nv, np.inf),
                   _fake()).status == sim.CONTROLLER
    stuck = sim.run(scene, stand.q, v0, 0.01, 1e-3, step_factory=_fake("max iterations"))
    assert stuck.statuses == [sim.NOT_CONVERGED] and stuck.iterations[0] == 7 and stuck.residuals[0] == 0.5


def test_real_solver_non_convergence_stops(go1, stand):
    """One ADMM iteration cannot solve a landing: the rollout stops with its residual."""
    v0 = np.random.default_rng(0).normal(size=go1.nv)
    v0[2] = -0.5
    r = cd.simulate(go1, FEET, stand.q, v0, 0.01, 1e-3, step="reference", max_iter=1)
    assert r.status == sim.NOT_CONVERGED and r.residuals[-1] > 1e-10 and len(r.statuses) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"contacts": []}, "no contact candidates"),
    ({"dt": 0.0}, "dt must be > 0"),
    ({"contacts": ["FL_foot/-1"]}, "radius"),
    ({"normal": (0, 0, 0)}, "ground normal"),
    ({"mu": -0.1}, "friction"),
    ({"q0": np.zeros(3)}, "q0 must have 19"),
    ({"step": "mujoco"}, "step must be"),
])
def test_bad_inputs_raise(go1, kwargs, message):
    args = {"contacts": FEET, "q0": go1.neutral_q(), "v0": np.zeros(go1.nv), "T": 0.01, "dt": 1e-3}
    extra = {k: kwargs.pop(k) for k in ("normal", "mu", "step") if k in kwargs}
    args.update(kwargs)
    with pytest.raises(InputError, match=message):
        cd.simulate(go1, args["contacts"], args["q0"], args["v0"], args["T"], args["dt"], **extra)


def test_csv_and_figure(go1, tmp_path):
    q0 = go1.neutral_q()
    q0[2] = 1.0
    r = cd.simulate(go1, FEET, q0, np.zeros(go1.nv), 0.01, 1e-3)
    with open(write_csv(r, tmp_path / "out" / "roll.csv")) as f:
        rows = list(csv.reader(f))
    assert len(rows) == 11 and len(rows[0]) == 4 + go1.nq + 2 * go1.nv + 16
    joints = [b.joint.name for b in go1.bodies[1:]]         # go1's URDF, read by Pinocchio's order: hips, thighs, calves
    assert joints[:3] == ["FL_hip_joint", "FL_thigh_joint", "FL_calf_joint"]
    base = ["x", "y", "z", "qx", "qy", "qz", "qw"]
    assert rows[0][4:4 + go1.nq] == base + joints
    assert rows[0][4 + go1.nq:4 + go1.nq + go1.nv] == [f"v_{n}" for n in ["x", "y", "z", "rx", "ry", "rz"] + joints]
    assert rows[0][4 + go1.nq + go1.nv:4 + go1.nq + 2 * go1.nv][6:] == [f"tau_{n}" for n in joints]
    assert rows[0][-4:] == ["c3:RR_foot@-0.0173782,0,-0.0098993." + x for x in ("gap", "ft1", "ft2", "fn")]
    assert rows[1][1] == sim.FREE and float(rows[-1][0]) == pytest.approx(0.009)
    assert float(rows[-1][rows[0].index("z")]) == pytest.approx(r.q[9][2], abs=1e-15)
    assert float(rows[-1][rows[0].index("v_RL_calf_joint")]) == pytest.approx(r.v[9][go1.bodies[9].v_index], abs=1e-15)
    png = plot(r, tmp_path / "roll.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out", "roll.csv", "roll.png"]


def test_baumgarte_closes_a_penetration(box):
    """A box 1 mm into flat ground with β = 0.2: the first step closes β of the gap exactly (its
    normal velocity bound σ_n ≥ −β d/dt is active from rest); the velocity it gained then carries
    it out of the ground; without β the penetration stays."""
    q0 = _box_on(np.array([0.0, 0.0, 1.0]), 0.0)
    q0[2] -= 1e-3
    r = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.01, 1e-3, step="reference", baumgarte=0.2)
    assert np.abs(r.gaps[1] + 0.8e-3).max() < 1e-12 and r.gaps[-1].min() > 0
    plain = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.01, 1e-3, step="reference", baumgarte=0.0)
    assert np.abs(plain.gaps + 1e-3).max() < 1e-9           # without it the penetration stays (to the solve's tol)


def _cli(*args, cwd):
    return run_cli("simulate", *args, cwd=cwd)


def test_cli_simulate(tmp_path):
    """A short drop writes both files and says how it ended; a rollout that stops exits 1 with
    its files; bad input is one line on stderr, exit 2, nothing written."""
    feet = [a for f in FEET for a in ("--contact", f)]
    ok = _cli("go1", *feet, "-T", "0.01", "--drop", "0.5", "--step", "reference", "-o", "a", cwd=tmp_path)
    assert ok.returncode == 0 and "10 steps of 0.001 s, free" in ok.stdout
    assert (tmp_path / "a" / "rollout.csv").is_file() and (tmp_path / "a" / "rollout.png").is_file()
    fell = _cli("go1", *feet, "-T", "0.01", "--drop", "-1.5", "--step", "reference", "-o", "b", cwd=tmp_path)
    assert fell.returncode == 1 and "1 steps of 0.001 s, fell through" in fell.stdout
    assert (tmp_path / "b" / "rollout.csv").is_file()
    bad = _cli("go1", "--contact", "nosuchlink", "--step", "reference", "-o", "c", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nosuchlink" in bad.stderr
    assert not (tmp_path / "c").exists()


def test_compiled_step_rollout_equals_reference(box, tmp_path):
    """The rollout on the compiled step (one TEST_CFLAGS build per active set) equals the NumPy
    reference step's on a sliding box on a tilted plane (with the default Baumgarte term)."""
    theta = 0.4
    n = np.array([np.sin(theta), 0.0, np.cos(theta)])
    q0 = _box_on(n, theta)
    q0[:3] += 0.002 * n                                                  # a short drop first
    compiled = sim.factory("compiled", "admm", out_dir=tmp_path, cflags=TEST_CFLAGS)
    scene = sim.Scene(box, CORNERS, normal=n, mu=0.3)
    a = sim.run(scene, q0, np.zeros(6), 0.04, 1e-3, step_factory=compiled)
    b = sim.run(scene, q0, np.zeros(6), 0.04, 1e-3, step_factory=sim.factory("reference"))
    assert a.statuses == b.statuses and a.statuses[0] == sim.FREE and a.statuses[-1] == sim.OK
    assert np.abs(a.q - b.q).max() < 1e-12 and np.abs(a.forces - b.forces).max() < 1e-8


def test_compiled_step_refuses_mjcf_before_the_first_step(tmp_path):
    """The compiled contact step takes Pinocchio's q layout only: an MJCF robot with hand-listed contacts is refused
    when the rollout starts, not at its first contact, the line naming the routes an MJCF model takes; cd.simulate of
    it with contacts on the compiled step is one line too (its per-step route takes the model's own contacts,
    tests/mujoco/test_mujoco_simulate.py)."""
    pytest.importorskip("mujoco")
    path = tmp_path / "ball.xml"
    path.write_text('<mujoco><worldbody><body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1" mass="1"/>'
                    '</body></worldbody></mujoco>')
    robot = cd.load_robot(str(path))
    contacts = [f"{robot.bodies[0].name}@0,0,0/0.1"]
    with pytest.raises(cd.ConstraintError, match=r"q layout.*runs on cd.simulate\(model.xml, T=…\) with its own "
                                                 "contacts, cd.mujoco_rollout or `casadi-delassus simulate"):
        sim.simulate(robot, contacts, robot.neutral_q(), np.zeros(6), 1.0, 1e-3)
    for model in (robot, str(path)):
        with pytest.raises(InputError, match="an MJCF model on the compiled step has its own contacts"):
            cd.simulate(model, contacts, robot.neutral_q(), np.zeros(6), 1.0, 1e-3)


def test_cd_simulate_of_a_pinocchio_robot_needs_its_contacts_and_state(go1):
    """cd.simulate's arguments after the robot have defaults for an MJCF model's sake: a Pinocchio-layout robot without
    them is one line naming them, and ``keyframe`` (an MJCF model's) is refused for it."""
    with pytest.raises(InputError, match=r"takes contacts, q0, v0, T and dt \(missing: q0, v0, dt\)"):
        cd.simulate(go1, FEET, T=0.1)
    with pytest.raises(InputError, match="keyframe is an MJCF model's"):
        cd.simulate(go1, FEET, go1.neutral_q(), np.zeros(go1.nv), 0.1, 1e-3, keyframe=0)


def _singles_equal_batch(scene, Q0, V0, T, factory, controller=None, **kw):
    """run_batch against N single rollouts of the same scene: same statuses, states, forces."""
    from casadi_delassus.simulation.simulate_batch import STOPPED, run_batch
    b = run_batch(scene, Q0, V0, T, 1e-3, controller, factory, **kw)
    for e, (q0, v0) in enumerate(zip(Q0, V0)):
        r = sim.run(scene, q0, v0, T, 1e-3, controller, factory)
        n = len(r.statuses)
        assert list(b.statuses[:n, e]) == r.statuses and set(b.statuses[n:, e]) <= {STOPPED}
        assert b.status[e] == r.status
        assert np.array_equal(b.q[:len(r.q), e], r.q) and np.array_equal(b.forces[:n, e], r.forces)
        assert np.all(np.isnan(b.q[len(r.q):, e]))
    return b


def test_batch_equals_single_rollouts(go1, stand):
    """Four go1 environments (resting, dropped, dropped with a push, falling through) under one
    batched PD: each equals its own single rollout, bit for bit; the one that fell stops alone."""
    scene = sim.Scene(go1, FEET)
    Q0 = np.array([stand.q, sim.place(scene, stand.q, 0.004), sim.place(scene, stand.q, 0.002), stand.q])
    Q0[3, 2] -= 1.5
    V0 = np.zeros((4, go1.nv))
    V0[2, :3] = (0.3, -0.2, -0.1)
    pd = cd.pd_controller(go1, stand.q, 60.0, 2.0, stand.tau)
    b = _singles_equal_batch(scene, Q0, V0, 0.03, reference_steps(), pd)
    assert b.status == [sim.OK, sim.OK, sim.OK, sim.FELL]
    assert (b.statuses[:, 1] == sim.FREE).any() and b.statuses[0, 3] == sim.FELL


def test_batch_on_the_compiled_step(box, tmp_path):
    """The compiled step's batch entry point (two threads) inside run_batch equals single
    rollouts on the same compiled steps: boxes sliding down a tilted plane from three heights."""
    theta = 0.4
    n = np.array([np.sin(theta), 0.0, np.cos(theta)])
    scene = sim.Scene(box, CORNERS, normal=n, mu=0.3)
    Q0 = np.array([_box_on(n, theta) + np.r_[h * n, np.zeros(4)] for h in (0.0, 0.001, 0.003)])
    factory = sim.factory("compiled", "admm", out_dir=tmp_path, cflags=TEST_CFLAGS)
    _singles_equal_batch(scene, Q0, np.zeros((3, 6)), 0.03, factory, threads=2)


def test_sphere_friction_point_and_place(go1):
    """A sphere's friction point is its lowest point toward the ground at q0 (world position
    centre − r n), fixed to its body; place() puts the lowest candidate at the clearance asked."""
    rng = np.random.default_rng(3)
    n = np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])
    scene = sim.Scene(go1, ["FL_calf@0.01,0,-0.2/0.02", "RR_foot/0.03"], normal=n)
    q = go1.perturbed_q(go1.neutral_q(), 0.5, rng)
    q[3:7] = (0.1, -0.2, 0.05, 0.97) / np.linalg.norm((0.1, -0.2, 0.05, 0.97))
    points = scene.friction_points(q)
    for c, p in zip(scene.candidates, points):
        X = reference.world_transform(go1, q, c.body)
        world = reference._origin(X) + X[:3, :3].T @ p
        centre = reference._origin(X) + X[:3, :3].T @ c.point
        assert np.abs(world - (centre - c.radius * scene.normal)).max() < 1e-12
    placed = sim.place(scene, q, 0.07)
    assert scene.gaps(placed).min() == pytest.approx(0.07, abs=1e-12)
    assert np.array_equal(placed[3:], q[3:])


def _fails_when_warm(robot, specs, mu, frame):
    """A step that converges from λ₀ = 0 only (λ = 1e-3 each time): a warm start that fails."""
    def step(q, v, tau, dt, lam0=None, gap=None, active=None):
        warm = lam0 is not None and np.any(lam0)
        return sim.StepResult(np.full(3 * len(specs), 1e-3), np.zeros(3 * len(specs)), v, 9, 1.0 if warm else 0.0,
                              "max iterations" if warm else "converged")
    return step


def test_a_failed_warm_start_is_retried_cold(go1, stand):
    """A solve that fails from the previous impulses is tried again from zero: the step goes on
    with the status that says so, in single and batched rollouts alike."""
    scene = sim.Scene(go1, FEET)
    r = sim.run(scene, stand.q, np.zeros(go1.nv), 0.004, 1e-3, step_factory=_fails_when_warm)
    assert r.statuses == [sim.OK] + [sim.COLD] * 3 and r.completed
    Q0 = np.array([stand.q, stand.q])
    Q0[1, 2] += 0.5                                                      # in the air: free steps
    b = _singles_equal_batch(scene, Q0, np.zeros((2, go1.nv)), 0.004, _fails_when_warm)
    assert list(b.statuses[:, 0]) == r.statuses and set(b.statuses[:, 1]) == {sim.FREE}


def test_auto_solver_on_the_reference_step(box):
    """solver="auto" picks per active set (step.auto_solver): four corners of one box are more
    than two contacts on a body, so ADMM; the rollout equals the one asking for ADMM."""
    n = np.array([0.0, 0.0, 1.0])
    q0 = _box_on(n, 0.0)
    q0[2] += 0.002
    a = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.03, 1e-3, step="reference", solver="auto")
    b = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.03, 1e-3, step="reference", solver="admm")
    assert a.statuses == b.statuses and np.array_equal(a.q, b.q) and a.statuses[-1] == sim.OK


@pytest.mark.parametrize("change", [lambda q: q.__setitem__(slice(3, 7), 3 * q[3:7]),
                                    lambda q: q.__setitem__(slice(3, 7), 0.0)])
def test_a_q0_off_norm_one_is_refused_by_the_rule_of_every_q(go1, stand, change):
    """Issue 31, point 8: the rollouts' q0 (single and batched) goes through runtime/inputs.py unit_q as every q."""
    from casadi_delassus.simulation.simulate_batch import run_batch
    q = stand.q.copy()
    change(q)
    scene = sim.Scene(go1, FEET)
    with pytest.raises(InputError, match="quaternion") as e:
        sim.run(scene, q, np.zeros(go1.nv), 0.01, 1e-3, step_factory=_fake())
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="row 1 .*quaternion"):
        run_batch(scene, np.vstack([stand.q, q]), np.zeros((2, go1.nv)), 0.01, 1e-3, step_factory=_fake())


@pytest.mark.parametrize("angle", [0.01, 0.05])
def test_a_tilted_box_lands_with_the_default_baumgarte(box, angle):
    """The toppling G1 of issue 31 point 18 stopped "not converged" once Baumgarte's term was on by default: each
    corner pushed out in proportion to its own depth asks a tilted rigid body for a motion with no sticking answer.
    The box tilted 0.01 / 0.05 rad stopped at steps 135 / 156 (ADMM at 1,000 iterations); with one push per body
    (gap_term: its deepest penetration) every solve converges."""
    scene = sim.Scene(box, CORNERS)
    r = sim.run(scene, tilted_box(box, angle), np.zeros(6), 0.2, 1e-3, step_factory=sim.factory("reference"))
    assert r.completed and len(r.statuses) == 200, (r.status, len(r.statuses))
    assert np.max(r.residuals) <= 1e-10 and r.gaps.min() < -1e-4         # it did land inside the ground


def test_the_gap_term_pushes_a_body_by_its_deepest_penetration():
    """gap_term: β times the deepest min(d, 0) among the contact's body's contacts, single and batched; none at β = 0."""
    gaps, bodies = np.array([-2e-5, -1e-5, 3e-6, 4e-6, -5e-6]), np.array([0, 0, 0, 1, 2])
    expected = 0.1 * np.array([-2e-5, -2e-5, -2e-5, 0.0, -5e-6])
    assert np.array_equal(sim.gap_term(0.1, gaps, bodies), expected)
    assert np.array_equal(sim.gap_term(0.1, np.vstack([gaps, -gaps]), bodies),
                          np.vstack([expected, 0.1 * np.array([-3e-6, -3e-6, -3e-6, -4e-6, 0.0])]))
    assert sim.gap_term(0.0, gaps, bodies) is None and sim.gap_term(0.1, gaps[:0], bodies[:0]).shape == (0,)


G1_SOLES = [f"{side}_ankle_roll_link@{p}" for side in ("left", "right")
            for p in ("0.12,0.03,-0.03", "0.12,-0.03,-0.03", "-0.05,0.03,-0.03", "-0.05,-0.03,-0.03")]


@pytest.mark.slow
def test_a_toppling_g1_rolls_out_with_the_default_solve(tmp_path):
    """Issue 31, point 18: G1 (registry URDF), 8 sole points, PD to its neutral pose with kp 100, kd 0.5 topples; its
    C rollout stopped "not converged" at 1.288 s with the default 1,000 ADMM iterations.  Now 3 s run through, every
    solve within the budget (≈ 1 min on 2 cores, most of it the G1 build; tests/test_contact*.py check the saved hard
    steps fast)."""
    robot = cd.load_robot("g1")
    q = robot.neutral_q()
    scene = sim.Scene(robot, G1_SOLES)
    r = sim.run(scene, sim.place(scene, q, 0.0), np.zeros(robot.nv), 3.0, 1e-3, sim.pd_controller(robot, q, 100.0, 0.5),
                sim.factory("compiled", out_dir=tmp_path))
    assert r.completed and len(r.statuses) == 3000, (r.status, len(r.statuses))
    assert np.max(r.iterations) <= 1000 and np.max(r.residuals) <= 1e-10
    assert r.base_height()[-1] < 0.3        # it did fall


def test_compiled_simulate_takes_baumgarte_and_out_dir(box, tmp_path, monkeypatch):
    """Issue 31 points 3 and 17: cd.simulate on the compiled step takes Baumgarte's β (it refused it; the factory
    dropped the gap) and the default one brings a box dropped 5 cm to rest within 1e-6 m of the ground, where β = 0
    leaves it 0.5 mm inside; it builds into out_dir, not ./codegen_out of the working directory."""
    monkeypatch.chdir(tmp_path)
    q0 = sim.place(sim.Scene(box, CORNERS), box.neutral_q(), 0.05)
    kw = {"step": "compiled", "out_dir": tmp_path / "builds", "cflags": TEST_CFLAGS}
    rest = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.4, 1e-3, **kw)
    deep = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.4, 1e-3, baumgarte=0.0, **kw)
    assert rest.completed and rest.gaps.min() < -5e-4 and rest.gaps[-100:].min() >= -1e-6
    assert deep.gaps[-1].min() < -5e-4
    assert list((tmp_path / "builds").rglob("contact_*.so")) and not (tmp_path / "codegen_out").exists()
    with pytest.raises(InputError, match="baumgarte β must be in"):
        cd.simulate(box, CORNERS, q0, np.zeros(6), 0.4, 1e-3, baumgarte=1.5, **kw)


@pytest.mark.parametrize("options", [{"linear_solve": "matrix_free"}, {"linear_solve": "auto"}, {"relaxed": True}])
def test_the_c_rollout_takes_each_build_option_of_the_step(box, tmp_path, options):
    """Every build option the per-step loop takes works on the C rollout of a linear feedback too (linear_solve and
    relaxed were a TypeError traceback there): a box landing tilted, 80 steps, equal on both routes (1e-12 in q)."""
    q0 = tilted_box(box, 0.05)
    kw = {"step": "compiled", "solver": "admm", "out_dir": tmp_path, "cflags": TEST_CFLAGS, "quiet": True, **options}
    pd = cd.pd_controller(box, q0, 0.0, 0.0)
    c = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.08, 1e-3, pd, **kw)
    loop = cd.simulate(box, CORNERS, q0, np.zeros(6), 0.08, 1e-3, lambda t, q, v: pd(t, q, v), **kw)
    assert list(tmp_path.rglob("rollout_*.so")) and c.completed and c.statuses == loop.statuses
    assert sim.OK in c.statuses and np.abs(c.q - loop.q).max() <= 1e-12


@pytest.mark.parametrize("linear", [True, False])
def test_an_unknown_build_option_is_one_line_on_both_routes(box, tmp_path, linear):
    """A build option neither build knows was a TypeError traceback from the step or the rollout: one line now, before
    anything is built."""
    q0 = tilted_box(box, 0.05)
    pd = cd.pd_controller(box, q0, 0.0, 0.0)
    with pytest.raises(InputError, match=r"unknown build option\(s\) 'threads' of the compiled step \(known: out_dir,"):
        cd.simulate(box, CORNERS, q0, np.zeros(6), 0.01, 1e-3, pd if linear else (lambda t, q, v: np.zeros(6)),
                    out_dir=tmp_path, threads=2)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("scene_kw, message", [
    ({"mu": [0.5, 0.6, 0.7]}, r"friction μ: one number or 4 \(one per candidate\), got shape \(3,\)"),
    ({"mu": "slippery"}, "friction μ must be finite"),
    ({"height": np.nan}, "ground height must be a finite number"),
    ({"height": np.inf}, "ground height must be a finite number"),
    ({"height": -np.inf}, "ground height must be a finite number"),
    ({"margin": np.nan}, "activation margin must be a finite number"),
    ({"margin": np.inf}, "activation margin must be a finite number"),
    ({"normal": (0.0, 0.0, 2.0)}, "ground normal must be three finite numbers of norm 1"),
    ({"normal": (0.0, 0.6, 0.6)}, "ground normal must be three finite numbers of norm 1"),
])
def test_scene_refuses_what_would_be_silently_wrong(go1, scene_kw, message):
    """Issue 31 points 10 and 16: a NaN or infinite ground height or margin let the robot fall through with every step
    "free" (NaN gaps are never ≤ margin nor below the fall depth), a normal that is not unit was normalised while the
    docs say it is refused, and μ of the wrong length was numpy's broadcasting traceback: each is one line now."""
    with pytest.raises(InputError, match=message):
        sim.Scene(go1, FEET, **scene_kw)


@pytest.mark.parametrize("kwargs, message", [
    ({"tau_limit": np.nan}, "tau_limit must be a number > 0"),
    ({"tau_limit": 0.0}, "tau_limit must be a number > 0"),
    ({"tau_limit": "1e3"}, "tau_limit must be a number > 0"),
    ({"baumgarte": np.nan}, "baumgarte must be a finite number"),
    ({"baumgarte": -0.1}, "baumgarte β must be in"),
    ({"T": 0.0}, "less than half a step"),
    ({"T": 4e-4}, "less than half a step"),
    ({"T": 1e300}, "more than the 10,000,000 one rollout takes"),
    ({"dt": 1e-300}, "more than the 10,000,000 one rollout takes"),
    ({"T": np.inf}, "T \\(the duration\\) must be a finite number"),
    ({"dt": np.nan}, "dt must be a finite number"),
    ({"q0": np.ma.masked_array(np.zeros(19), mask=True)}, "input q0 is a masked array"),
    ({"v0": ["fast"] * 18}, "input v0 must hold real numbers"),
    ({"v0": np.zeros(18, dtype=complex)}, "input v0 must hold real numbers, got dtype complex128"),
])
def test_run_refuses_before_the_first_step(go1, stand, kwargs, message):
    """Issue 31 points 10 and 13: tau_limit NaN turned the torque check off; T = 0 or below half a step ended in an
    IndexError, T = 1e300 in an OverflowError, dt = 1e-300 ran for ever: each is one line before any step (the factory
    here fails the test if a step is ever asked for)."""
    args = {"q0": stand.q, "v0": np.zeros(go1.nv), "T": 0.01, "dt": 1e-3, **kwargs}
    never = lambda *a: pytest.fail("a step was built")          # noqa: E731
    with pytest.raises(InputError, match=message):
        sim.run(sim.Scene(go1, FEET), args.pop("q0"), args.pop("v0"), args.pop("T"), args.pop("dt"), None, never, **args)


def test_batch_records_too_big_are_refused_before_allocating(go1, stand):
    """Issue 31 point 13: 20,000 environments × 5 s of go1 would record 55 GiB: refused in one line, at once (it was a
    MemoryError, or the machine swapping), naming the size; a batch within the limit is not refused for its size."""
    import time
    from casadi_delassus.simulation.simulate_batch import run_batch
    scene = sim.Scene(go1, FEET)
    Q0, V0 = np.broadcast_to(stand.q, (20_000, go1.nq)), np.zeros((20_000, go1.nv))
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"records of 20,000 environment\(s\) × 5,000 steps would take 5\d\.\d GiB"):
        run_batch(scene, Q0, V0, 5.0, 1e-3, step_factory=lambda *a: pytest.fail("a step was built"))
    assert time.perf_counter() - t0 < 1.0
    assert sim.step_count(5.0, 1e-3, sim.record_bytes(scene), 100) == 5000


def test_a_failed_write_is_one_line_and_leaves_no_file(go1, tmp_path, monkeypatch):
    """Issue 31 point 15: a full disk (ENOSPC in the middle of the CSV) is an OutputError naming the file, the
    temporary file is removed and a CSV already there is kept; without matplotlib the figure is an OutputError too."""
    import errno
    import sys
    from casadi_delassus.simulation import rollout_io
    from casadi_delassus.errors import OutputError
    q0 = go1.neutral_q()
    q0[2] = 1.0
    r = cd.simulate(go1, FEET, q0, np.zeros(go1.nv), 0.003, 1e-3, step="reference")
    path = write_csv(r, tmp_path / "roll.csv")
    before = path.read_bytes()

    def full(rollout):          # the disk fills after the header
        yield from ()
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(rollout_io, "_rows", full)
    with pytest.raises(OutputError, match="cannot write .*roll.csv: No space left on device"):
        write_csv(r, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["roll.csv"]
    monkeypatch.setitem(sys.modules, "matplotlib", None)            # import matplotlib raises ImportError
    with pytest.raises(OutputError, match="no figure: matplotlib is not installed"):
        plot(r, tmp_path / "roll.png")


def test_place_puts_the_lowest_candidate_at_the_clearance(go1):
    """cd.place on random tilted configurations: the lowest foot (by Robot.frame_placement, checked against Pinocchio in
    test_models.py) sits at the clearance above a tilted ground, spheres by their radius; the joints and the base's
    orientation stay."""
    rng = np.random.default_rng(7)
    n = np.array([0.1, -0.2, 1.0]) / np.linalg.norm([0.1, -0.2, 1.0])
    feet = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
    for clearance, radius in ((0.0, 0.0), (0.05, 0.02), (0.3, 0.0)):
        q = go1.random_q(rng)
        placed = cd.place(go1, [f"{f}/{radius}" for f in feet], q, clearance=clearance, normal=n, height=0.4)
        lowest = min(go1.frame_placement(placed, f).translation @ n for f in feet) - 0.4 - radius
        assert lowest == pytest.approx(clearance, abs=1e-12)
        assert np.array_equal(placed[3:], q[3:]) and np.allclose(np.cross(placed[:3] - q[:3], n), 0, atol=1e-12)


def test_place_refuses_a_fixed_base():
    arm = cd.load_robot("chain:n=3")
    with pytest.raises(InputError, match="no free base"):
        cd.place(arm, ["link3"], arm.neutral_q())


def test_figure_legends_name_joints_and_each_point_of_a_link(go1, tmp_path, monkeypatch):
    """Four points on one link: four force labels link@offset, all different; the joint panel names every joint."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    seen = {}
    monkeypatch.setattr(Figure, "savefig", lambda fig, f, **kw: seen.update(
        legends=[[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes if ax.get_legend()]))
    corners = [f"FL_calf@{x},{y},-0.2" for x in (0.02, -0.02) for y in (0.01, -0.01)]
    q0 = go1.neutral_q()
    q0[2] = 1.0
    plot(cd.simulate(go1, corners, q0, np.zeros(go1.nv), 0.002, 1e-3, step="reference"), tmp_path / "f.png")
    joints, forces = seen["legends"]
    assert joints == [b.joint.name for b in go1.bodies[1:]]
    assert forces == ["FL_calf@0.02,0.01,-0.2", "FL_calf@0.02,-0.01,-0.2", "FL_calf@-0.02,0.01,-0.2",
                      "FL_calf@-0.02,-0.01,-0.2"]
