"""The runtime harnesses: generated C timed from C (dlopen), Pinocchio from Python; only
that they run and give positive numbers (no timing assertions)."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus import timing
from casadi_delassus.errors import DelassusError
from casadi_delassus.timing.pinocchio_harnesses import PinocchioCppHarness
from casadi_delassus.verify.check import relative_error

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
    r = subprocess.run([sys.executable, "-m", "casadi_delassus", "bench", "go1", "-s", "4F3", "-a", "naive",
                        "--calls", "50", "--reps", "2", "--samples", "4", "--pinocchio", "python",
                        "-o", str(out_dir), "--results", str(tmp_path)], capture_output=True, text=True)
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


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_pinocchio_cpp_contact_route_solves_the_problem_its_binding_solves(solver):
    """The C++ harness's contact modes (issue 25's Pinocchio route) give the λ and the iteration
    count of Pinocchio's Python solver on the same G, g, μ, tolerance; a mode without its problem
    is refused.  Only a cached harness is exercised (see above)."""
    from casadi_delassus.contact.step import check_contacts
    from casadi_delassus.model import load_robot
    from casadi_delassus.verify import contact_problems as cp
    pytest.importorskip("pinocchio")
    if timing.pinocchio_cpp_problem() or timing.build_pinocchio_harness(only_cached=True) is None:
        pytest.skip("C++ Pinocchio harness not built yet (run casadi-delassus bench once)")
    p = cp.build("go1_slide")
    robot = load_robot(p.robot)
    cons = check_contacts(robot, p.specs)
    state = [dict(q=p.q, v=p.v, tau=p.tau)]
    h = PinocchioCppHarness(robot, cons, state, calls=5, warmup=1, mode=f"contact_{solver}",
                            contact=(p.dt, 1e-8, p.mu, p.G, p.g))
    try:
        t = h.run(2)
    finally:
        h.close()
    lam, _, its, converged = cp.pinocchio_solve(p, solver=solver, tol=1e-8)
    assert converged and t.output[0] == its and len(t.ns) == 2
    assert np.abs(t.output[1:] - lam).max() <= 1e-12 * np.abs(lam).max()
    with pytest.raises(DelassusError, match="needs the contact problem"):
        PinocchioCppHarness(robot, cons, state, mode=f"contact_{solver}")
