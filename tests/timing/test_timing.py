"""The runtime harnesses: generated C timed from C (dlopen), Pinocchio from Python; only
that they run and give positive numbers (no timing assertions)."""
import shutil

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus import timing
from casadi_delassus.errors import DelassusError
from casadi_delassus.timing.pinocchio_harnesses import PinocchioCppHarness
from casadi_delassus.verify.check import relative_error

from cli_runner import run_cli

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="needs a C compiler")


@pytest.fixture(scope="module")
def go1(out_dir):
    return cd.generate("go1", "4F3", "naive", out_dir=out_dir)


def test_c_harness_gives_positive_per_call_times(go1, tmp_path):
    sets = timing.random_samples(go1.robot, go1.constraints, samples=4)
    t = timing.time_c(go1, sets, calls=50, reps=3, warmup=5, work_dir=tmp_path)
    assert len(t.ns) == 3 and all(x > 0 for x in t.ns) and t.min <= t.median <= t.max
    # the harness really called the function: its output for sample 0 is the loader's
    assert np.allclose(t.output.reshape(12, 12, order="F"), go1(sets[0]["q"]), rtol=0, atol=1e-12)
    assert "dlopen" in (tmp_path / "cd_go1_4F3_naive.timing.c").read_text()


def test_c_harness_with_runtime_K_input(out_dir):
    f = cd.generate("panda", ["panda_hand_tcp:6d-input"], "naive", out_dir=out_dir)
    sets = timing.random_samples(f.robot, f.constraints, samples=3)
    t = timing.time_c(f, sets, calls=20, reps=2, warmup=1)
    assert all(x > 0 for x in t.ns)
    assert np.allclose(t.output.reshape(6, 6, order="F"), f(sets[0]["q"], K_panda_hand_tcp=sets[0]["K_panda_hand_tcp"]),
                       rtol=0, atol=1e-12)


def test_pinocchio_python_timing_and_same_matrix(go1):
    pytest.importorskip("pinocchio")
    qs = [s["q"] for s in timing.random_samples(go1.robot, go1.constraints, samples=3)]
    t = timing.time_pinocchio(go1.robot, go1.constraints, qs, calls=20, reps=2, method="python")
    assert t.method == timing.PIN_PYTHON and all(x > 0 for x in t.ns) and t.overhead_ns > 0
    assert relative_error(t.output, go1(qs[0]).reshape(-1, order="F")) < 1e-10


def test_pinocchio_cannot_time_runtime_K():
    robot = cd.load_robot("panda")
    cs, _ = cd.constraint_set(robot, ["panda_hand_tcp:6d-input"])
    assert "no equivalent" in timing.pinocchio_problem(robot, cs)


def test_cli_bench_prints_table(out_dir, tmp_path):
    pytest.importorskip("pinocchio")
    r = run_cli("bench", "go1", "-s", "4F3", "-a", "naive", "--calls", "50", "--reps", "2", "--samples", "4",
                "--pinocchio", "python", "-o", out_dir, "--results", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "pinocchio (Python)" in r.stdout and "instr/ns" in r.stdout and "repetition 2/2" in r.stderr
    assert (tmp_path / "runtime.md").is_file() and (tmp_path / "runtime.csv").is_file()


def test_pinocchio_cpp_harness_when_already_built(go1):
    """Building the C++ harness takes about a minute, so only a cached one (from
    `bench/runtime.py` or `casadi-delassus bench`) is exercised here."""
    if timing.pinocchio_cpp_problem():
        pytest.skip(timing.pinocchio_cpp_problem())
    exe = timing.build_pinocchio_harness(only_cached=True)
    if exe is None:
        pytest.skip("C++ Pinocchio harness not built yet (run casadi-delassus bench once)")
    qs = [s["q"] for s in timing.random_samples(go1.robot, go1.constraints, samples=3)]
    t = timing.time_pinocchio(go1.robot, go1.constraints, qs, calls=20, reps=2, method="cpp")
    assert t.method == timing.PIN_CPP and all(x > 0 for x in t.ns)
    assert relative_error(t.output, go1(qs[0]).reshape(-1, order="F")) < 1e-10


def test_dynamics_timed_against_pinocchio_constraint_dynamics_on_the_same_problem(out_dir):
    """Sets with v, τ and the k of Pinocchio's problem: our pv and constraintDynamics give the
    same v̇ (3D contacts, where k ≠ 0), so their timings are of the same computation."""
    pytest.importorskip("pinocchio")
    f = cd.generate("go1", "4F3", "pv", out_dir=out_dir)
    sets = timing.random_samples(f.robot, f.constraints, samples=3, dynamics=True)
    assert np.abs(sets[0]["k"]).max() > 1e-3
    ours = timing.time_c(f, sets, calls=20, reps=1, warmup=1)
    assert timing.pinocchio_mode(f.manifest) == "dynamics"
    pin_t = timing.time_pinocchio(f.robot, f.constraints, sets, calls=20, reps=2, method="python", mode="dynamics")
    assert pin_t.label == "pinocchio constraintDynamics" and all(x > 0 for x in pin_t.ns)
    vdot = ours.output[:f.robot.nv]
    assert relative_error(vdot, pin_t.output) < 1e-9


def _cached_cpp_harness_or_skip():
    pytest.importorskip("pinocchio")
    if timing.pinocchio_cpp_problem() or timing.build_pinocchio_harness(only_cached=True) is None:
        pytest.skip("C++ Pinocchio harness not built yet (run casadi-delassus bench once)")


@pytest.mark.parametrize("solver, admm", [("pgs", ("OSQP", 0)), ("admm", ("OSQP", 0)), ("admm", ("LINEAR", 5))])
def test_pinocchio_cpp_contact_route_is_the_whole_step_of_ours(solver, admm, out_dir):
    """The C++ harness's contact modes (issue 33's Pinocchio route: aba, g, computeDelassusMatrix, the solve, v_next by
    aba with the impulses as forces) build the problem's own G and g, give the λ and the iterations of Pinocchio's
    Python solver on them with the same ρ rule and Anderson capacity, and ours' v_next; a mode without its problem is
    refused.  Only a cached harness is exercised (see above)."""
    from casadi_delassus import contact_step
    from casadi_delassus.contact.step import check_contacts
    from casadi_delassus.model import load_robot
    from casadi_delassus.timing import contact_bench
    from casadi_delassus.verify import contact_problems as cp
    _cached_cpp_harness_or_skip()
    p = cp.build("go1_slide")
    robot = load_robot(p.robot)
    cons = check_contacts(robot, p.specs)
    state = [dict(q=p.q, v=p.v, tau=p.tau)]
    h = PinocchioCppHarness(robot, cons, state, calls=5, warmup=1, mode=f"contact_{solver}",
                            contact=(p.dt, 1e-8, p.mu, p.G, p.g), admm=admm)
    try:
        t = h.run(2)
    finally:
        h.close()
    m, nv = len(p.g), robot.nv
    its, lam, v_next, dg, dG = t.output[0], t.output[1:1 + m], t.output[1 + m:1 + m + nv], t.output[-2], t.output[-1]
    assert len(t.ns) == 2 and dg <= 1e-12 * np.abs(p.g).max() and dG <= 1e-12 * np.abs(p.G).max()
    sol, op, models, datas, settings, result = contact_bench.pinocchio_solver(p.G, p.mu, solver, admm, tol=1e-8)
    sol.solve(op, p.g, models, datas, settings, result)
    assert result.converged and its == result.iterations
    assert np.abs(lam - np.ravel(result.retrieveConstraintImpulses())).max() <= 1e-9 * np.abs(lam).max()
    ours = contact_step(robot, p.specs, solver="pgs", mu=p.mu, out_dir=out_dir)(p.q, p.v, p.tau, dt=p.dt, tol=1e-8,
                                                                                 max_iter=10_000)
    assert np.abs(v_next - ours.v_next).max() <= 1e-5
    with pytest.raises(DelassusError, match="needs the contact problem"):
        PinocchioCppHarness(robot, cons, state, mode=f"contact_{solver}")
    with pytest.raises(DelassusError, match="ADMM settings"):
        PinocchioCppHarness(robot, cons, state, mode="contact_admm", contact=(p.dt, 1e-8, p.mu, p.G, p.g),
                            admm=("FAST", 0))


def test_mujoco_contact_model_has_our_physics_and_its_c_loop_our_qacc(out_dir):
    """MuJoCo's model of go1_stand (timing/mujoco_contact.py) has the contacts' rows only (go1.urdf's joint friction
    made 12 more), its free dynamics are Pinocchio's, its v_next is within the bench's 10 % of the velocity change
    ours make (its contacts are soft), and the C loop's mj_forward gives the Python binding's qacc."""
    mujoco = pytest.importorskip("mujoco")
    import pinocchio as pin
    from casadi_delassus import contact_step
    from casadi_delassus.timing import contact_bench as cb, mujoco_contact as mc
    from casadi_delassus.verify import contact_problems as cp
    p = cp.build("go1_stand")
    m, d = mc.model(p, "Newton", "elliptic")
    assert mc.rows(m, d) == (12, 0) and d.ncon == 4
    ours = contact_step(p.robot, p.specs, solver="pgs", mu=p.mu, out_dir=out_dir)(p.q, p.v, p.tau, dt=p.dt, tol=1e-8)
    v_free = p.v + p.dt * pin.aba(p.model, p.model.createData(), p.q, p.v, p.tau)
    assert np.abs(mc.v_next(p, m, d) - ours.v_next).max() <= cb.MJ_REL * np.abs(v_free - ours.v_next).max()
    free = mujoco.MjData(m)
    free.qpos[:], free.qvel[:], free.qfrc_applied[:] = d.qpos, d.qvel, d.qfrc_applied
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    mujoco.mj_forward(m, free)
    # 1e-6: go1.urdf's dummy root inertia (1e-6 kg m², off-diagonal 1e-6: not positive definite) is diagonal in MuJoCo
    assert np.abs(mc.v_next(p, m, free) - v_free).max() <= 1e-6 * np.abs(v_free).max()
    m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    h = mc.MujocoForwardHarness(m, d, calls=5)
    try:
        t = h.run(2)
    finally:
        h.close()
    assert len(t.ns) == 2 and tuple(t.output[1:3]) == (12, 4)
    assert np.abs(t.output[3:] - d.qacc).max() <= 1e-9 * np.abs(d.qacc).max()


def test_a1_problem_is_balanced_and_ours_solves_it(out_dir):
    """issue 33's A1 problem (pybullet's URDF): the contacts touch z = 0 and λ* = dt f_eq holds them still."""
    pytest.importorskip("pinocchio")
    pytest.importorskip("pybullet_data")
    import pinocchio as pin
    from casadi_delassus import contact_step
    from casadi_delassus.timing import a1_problem
    p = a1_problem.build()
    data = p.model.createData()
    pin.framesForwardKinematics(p.model, data, p.q)
    heights = [data.oMf[f].translation[2] for f in p.frames]
    assert min(heights) == pytest.approx(0.0, abs=1e-12) and max(heights) < 1e-3
    r = contact_step(p.robot, p.specs, solver="admm", mu=p.mu, out_dir=out_dir)(p.q, p.v, p.tau, dt=p.dt, tol=1e-10)
    assert r.converged and np.abs(r.lam - p.dt * p.f_eq).max() <= 1e-8 * np.abs(p.dt * p.f_eq).max()
    assert np.abs(r.v_next).max() <= 1e-8


def test_phase_harness_calls_the_functions_casadi_evaluates(out_dir):
    """timing/phases.py: each generated function of the step, called alone from C, gives CasADi's own value; the step
    with and without its iterations is timed beside them."""
    pytest.importorskip("pinocchio")
    from casadi_delassus import contact_step
    from casadi_delassus.codegen.contact_step import step_parts
    from casadi_delassus.runtime.contact_step import solver_options
    from casadi_delassus.timing import phases as ph
    from casadi_delassus.verify import contact_problems as cp
    p = cp.build("go1_stand")
    s = contact_step(p.robot, p.specs, solver="admm", mu=p.mu, out_dir=out_dir)
    r = s(p.q, p.v, p.tau, dt=p.dt, tol=1e-8)
    m = s.manifest
    prep, post, _, op = step_parts(s.robot, s.contacts, m["function"], m["delassus"], m["linear_solve"])
    factor, solve = op.factor, op.solve
    vals = {"q": p.q, "v": p.v, "tau": p.tau, "dt": [p.dt]}
    vals |= ph.evaluate(prep, vals)
    vals |= {"lam": r.lam, "b": r.lam, "d": [1.0], "R": np.ones(len(p.g))}
    vals |= ph.evaluate(factor, vals)
    fns = {"prep": prep, "post": post, "factor": factor, "solve": solve}
    opts = solver_options(1e-8, 10_000, "admm", True)
    h = ph.PhaseHarness(s.so, [(k, f, ph.inputs_of(f, vals)) for k, f in fns.items()],
                        dict(symbol=m["function"] + "_step", q=p.q, v=p.v, tau=p.tau, dt=p.dt, mu=p.mu, opts=opts,
                             opts0=np.r_[opts[:1], 0, opts[2:]], nv=len(p.v), m=len(p.g)), calls=5)
    try:
        ns, first = h.run(2)
    finally:
        h.close()
    assert set(ns) == {*fns, "step", "step_0_iterations"} and all(len(v) == 2 for v in ns.values())
    for k, f in fns.items():
        ref = ph.evaluate(f, vals)[f.name_out()[0]]
        assert np.abs(first[k] - ref).max() <= 1e-12 * max(np.abs(ref).max(), 1.0)
    from casadi_delassus.simulation.simulate import candidate_positions
    feet = candidate_positions(s.robot, tuple((c.body, (0.0, 0.0, 0.0)) for c in s.contacts.constraints))
    feet_cse = ph.instructions(ph.with_cse(feet))
    assert ph.recomputed(feet, feet)[2] == feet_cse          # all of a function computed twice
    apart, fused, again = ph.recomputed(prep, feet)
    assert apart == ph.instructions(prep) + feet_cse and 0 <= again <= feet_cse and fused == apart - again
