"""The compiled contact step (contact/step.py): equal to the NumPy references and Pinocchio on
go1, batched = single calls, bad inputs refused before solving, non-convergence reported."""
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from casadi_delassus import contact_step
from casadi_delassus.contact import SOLVERS, Options
from casadi_delassus.contact.step import contact_frames
from casadi_delassus.runtime.contact_step import N_INFO, c_pointer, solver_options
from casadi_delassus.errors import ConstraintError, DelassusError, InputError

from conftest import TEST_CFLAGS, TEST_LEVEL

pin = pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402


@pytest.fixture(scope="module")
def problems():
    return {n: cp.build(n) for n in ("go1_stand", "go1_slide")}


@pytest.fixture(scope="module")
def steps(tmp_path_factory, problems):
    """One compile (TEST_CFLAGS) of go1's four feet; the solver and relaxation are run-time options."""
    out = tmp_path_factory.mktemp("contact")
    specs = problems["go1_stand"].specs
    return {(solver, relaxed): contact_step("go1", specs, solver=solver, relaxed=relaxed, out_dir=out, cflags=TEST_CFLAGS,
                                            delassus="pv_osim")
            for solver in ("admm", "pgs") for relaxed in (False, True)}


@pytest.mark.parametrize("relaxed", [False, True])
@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("name", ["go1_stand", "go1_slide"])
def test_compiled_step_equals_the_numpy_reference(steps, problems, name, solver, relaxed):
    p = problems[name]
    r = steps[solver, relaxed](p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-10)
    ref = SOLVERS[solver](p.G, p.g, p.mu, exact=not relaxed, options=Options(tol=1e-10))
    assert r.status == ref.status == "converged"
    assert abs(r.iterations - ref.iterations) <= 1
    assert np.max(np.abs(r.lam - ref.lam)) <= 1e-9 * np.max(np.abs(ref.lam))
    assert max(r.residuals.primal, r.residuals.dual, r.residuals.complementarity) <= 1e-10


@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("name", ["go1_stand", "go1_slide"])
def test_compiled_step_matches_pinocchio(steps, problems, name, solver):
    p = problems[name]
    r = steps[solver, False](p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-10)
    lam, sigma, _, converged = cp.pinocchio_solve(p, solver=solver)
    assert converged
    assert np.max(np.abs(r.lam - lam)) <= 1e-6 * np.max(np.abs(lam))
    # v_next = v_free + M⁻¹ Jᵀ λ, with Pinocchio's crba and Jacobian
    data = p.model.createData()
    M = pin.crba(p.model, data, p.q)
    M = np.triu(M) + np.triu(M, 1).T
    v_free = p.v + p.dt * pin.aba(p.model, data, p.q, p.v, p.tau)
    assert np.allclose(r.v_next, v_free + np.linalg.solve(M, p.J.T @ r.lam), rtol=0, atol=1e-10)
    assert np.allclose(r.sigma, p.J @ r.v_next, atol=1e-10)


def test_go1_stand_and_slide_answers(steps, problems):
    p = problems["go1_stand"]
    r = steps["admm", False](p.q, p.v, p.tau, dt=p.dt)
    assert np.max(np.abs(r.lam - p.dt * p.f_eq)) <= 1e-6 * np.max(np.abs(p.dt * p.f_eq))
    assert np.max(np.abs(r.v_next)) < 1e-9                                   # it stays at rest
    s = problems["go1_slide"]
    r = steps["admm", False](s.q, s.v, s.tau, dt=s.dt, mu=0.1)
    assert np.allclose(r.lam[:3] / s.dt, [-2.806, 0.004, 28.057], atol=1e-3)
    lifted = steps["admm", True](s.q, s.v, s.tau, dt=s.dt, mu=0.1)
    assert np.all(np.abs(lifted.sigma[2::3] - 0.05) < 5e-3)


def test_batch_equals_single_calls(steps, problems):
    s = steps["admm", False]
    p = problems["go1_slide"]
    rng = np.random.default_rng(1)
    N = 5
    Q = np.tile(p.q, (N, 1))
    Q[:, 7:] += rng.normal(scale=0.02, size=(N, len(p.q) - 7))
    V = rng.normal(scale=0.1, size=(N, len(p.v)))
    TAU = np.tile(p.tau, (N, 1))
    for threads in (1, 2):
        b = s(Q, V, TAU, dt=p.dt, mu=0.3, threads=threads)
        for k in range(N):
            one = s(Q[k], V[k], TAU[k], dt=p.dt, mu=0.3)
            assert np.array_equal(b.lam[k], one.lam) and np.array_equal(b.v_next[k], one.v_next)
            assert b.iterations[k] == one.iterations and b.status[k] == one.status


def test_normals_turn_the_contact_rows(steps, problems):
    p = problems["go1_slide"]
    s = steps["admm", False]
    up = s(p.q, p.v, p.tau, dt=p.dt, mu=0.1)
    assert np.array_equal(s(p.q, p.v, p.tau, dt=p.dt, mu=0.1, normals=[0, 0, 1]).lam, up.lam)
    n = np.array([np.sin(0.2), 0.0, np.cos(0.2)])
    tilted = s(p.q, p.v, p.tau, dt=p.dt, mu=0.1, normals=n)
    B = np.kron(np.eye(4), contact_frames([n])[0])
    ref = SOLVERS["admm"](B @ p.G @ B.T, B @ p.g, p.mu)
    assert tilted.converged and np.max(np.abs(tilted.lam - ref.lam)) <= 1e-9 * np.max(np.abs(ref.lam))


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_gap_velocity_is_added_to_the_normal_rows_of_g(steps, problems, solver):
    """<name>_step_gap: g_n += gap per contact (a penetration pushed out at 1–4 cm/s); single and batched calls
    agree with the reference on (G, g + gap e_n), and gap = 0 is the plain step."""
    p = problems["go1_stand"]
    s = steps[solver, False]
    gap = np.array([-0.01, -0.02, -0.03, -0.04])
    r = s(p.q, p.v, p.tau, dt=p.dt, tol=1e-10, gap=gap)
    g = p.g.copy()
    g[2::3] += gap
    ref = SOLVERS[solver](p.G, g, p.mu, options=Options(tol=1e-10))
    assert r.converged and np.max(np.abs(r.lam - ref.lam)) <= 1e-9 * np.max(np.abs(ref.lam))
    assert np.all(r.sigma[2::3] >= -gap - 1e-9) and np.max(np.abs(r.sigma[2::3] + gap)) <= 1e-9    # stuck: σ_n = −gap
    batch = s(np.tile(p.q, (3, 1)), np.tile(p.v, (3, 1)), np.tile(p.tau, (3, 1)), dt=p.dt, tol=1e-10,
              gap=np.tile(gap, (3, 1)))
    assert np.array_equal(batch.lam[1], r.lam)
    assert np.array_equal(s(p.q, p.v, p.tau, dt=p.dt, gap=np.zeros(4)).lam, s(p.q, p.v, p.tau, dt=p.dt).lam)
    with pytest.raises(InputError, match="gap"):
        s(p.q, p.v, p.tau, dt=p.dt, gap=np.zeros(3))


def test_non_convergence_is_a_status_with_residuals(steps, problems):
    p = problems["go1_slide"]
    r = steps["admm", False](p.q, p.v, p.tau, dt=p.dt, mu=0.1, max_iter=2, tol=1e-14)
    assert r.status == "max iterations" and r.iterations == 2
    assert r.residuals.complementarity > 1e-14 or r.residuals.dual > 1e-14


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_overflow_is_a_nan_status_not_an_answer(steps, problems, solver):
    p = problems["go1_stand"]
    r = steps[solver, False](p.q, np.full(len(p.v), 1e200), p.tau, dt=p.dt)
    assert r.status == "NaN" and np.isnan(r.residuals.dual) and not r.converged


@pytest.mark.parametrize("change, words", [
    (dict(mu=-0.1), "mu"), (dict(mu=float("nan")), "mu"), (dict(mu=[0.5, 0.5]), "mu"),
    (dict(dt=0.0), "dt"), (dict(dt=-1e-3), "dt"), (dict(dt=float("nan")), "dt"),
    (dict(normals=[0, 0, 2]), "unit"), (dict(normals=[0, float("nan"), 1]), "unit"),
    (dict(tol=0.0), "tol"), (dict(max_iter=-1), "max_iter"), (dict(omega=2.5), "omega"),
    # issue 31, points 1 and 16: what the C int cannot hold, and what is no number
    (dict(max_iter=2 ** 31), "max_iter"), (dict(max_iter=1e10), "max_iter"), (dict(max_iter=1e300), "max_iter"),
    (dict(max_iter=float("inf")), "max_iter"), (dict(max_iter=float("nan")), "max_iter"),
    (dict(max_iter=None), "max_iter"), (dict(tol=None), "tol"), (dict(tol="1e-8"), "tol"),
    (dict(dt=[1e-3, 2e-3]), "dt"), (dict(dt=[1e-3]), "dt"), (dict(dt="0.001"), "dt"),
    (dict(normals=np.zeros((2, 3))), "normals"), (dict(normals=[[0, 0, 1]] * 5), "normals"),
    (dict(normals=np.ones((4, 3, 1))), "normals"), (dict(mu=np.ma.masked_array([0.5] * 4, mask=[0, 1, 0, 0])), "mu"),
    (dict(lam0=np.zeros(11)), "lam0"), (dict(gap=np.zeros((4, 1))), "gap"),
])
def test_bad_arguments_are_refused_before_solving(steps, problems, change, words):
    p = problems["go1_stand"]
    with pytest.raises(InputError, match=words) as e:
        steps["admm", False](p.q, p.v, p.tau, **{"dt": p.dt, **change})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("which", ["q", "v", "tau"])
def test_nan_states_are_refused(steps, problems, which):
    p = problems["go1_stand"]
    x = dict(q=p.q.copy(), v=p.v.copy(), tau=p.tau.copy())
    x[which][3] = np.nan
    with pytest.raises(InputError, match=which):
        steps["admm", False](**x, dt=p.dt)


@pytest.mark.parametrize("contacts, words", [
    ([], "no contacts"), (["FL_foot:3d"], "world-aligned point contact"), (["FL_foot:6d-world"], "world-aligned"),
])
def test_bad_contact_sets_are_refused(tmp_path, contacts, words):
    with pytest.raises(ConstraintError, match=words):
        contact_step("go1", contacts, out_dir=tmp_path)


def test_unknown_solver_is_refused(tmp_path):
    with pytest.raises(DelassusError, match="unknown contact solver"):
        contact_step("go1", ["FL_foot:3d-world"], solver="newton", out_dir=tmp_path)


ROUNDED_TOL = 1e-13
finite_or_not = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                          st.floats(min_value=1e-5, max_value=1e-1), st.floats(min_value=0.0, max_value=1.5))


@settings(max_examples=100, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(dt=finite_or_not, mu=st.one_of(finite_or_not, st.lists(finite_or_not, min_size=1, max_size=5)),
       tol=st.one_of(finite_or_not, st.sampled_from([1e-10, 1e-8])), max_iter=st.integers(-3, 400),
       omega=st.floats(-1, 3), normal=st.one_of(st.none(), st.lists(st.floats(-1, 1), min_size=3, max_size=3)),
       scale=st.floats(0, 0.3), solver=st.sampled_from(["admm", "pgs"]), relaxed=st.booleans(),
       gap=st.one_of(st.none(), st.lists(st.one_of(st.floats(-0.05, 0.05), finite_or_not), min_size=3, max_size=5)))
def test_fuzz_the_step_arguments(steps, problems, dt, mu, tol, max_iter, omega, normal, scale, solver, relaxed, gap):
    """Any arguments end in a one-line DelassusError, or in a status; a converged answer meets
    its tolerance and equals the NumPy reference on Pinocchio's G and g."""
    p = problems["go1_slide"]
    q = p.q.copy()
    q[7:] += scale * np.sin(np.arange(len(q) - 7))
    try:
        r = steps[solver, relaxed](q, p.v, p.tau, dt=dt, mu=mu, tol=tol, max_iter=max_iter, omega=omega, normals=normal,
                                   gap=gap)
    except DelassusError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
        return
    event(r.status)
    assert r.status in ("converged", "max iterations", "NaN")
    if r.status != "converged":
        return
    assert max(r.residuals.primal, r.residuals.dual, r.residuals.complementarity) <= tol
    G, g, _, _ = cp.delassus_and_free_velocity(p.model, p.frames, q, p.v, p.tau, dt)
    B = np.kron(np.eye(4), contact_frames([normal])[0]) if normal is not None else np.eye(12)
    mus = np.broadcast_to(np.asarray(mu, dtype=float), (4,))
    g = B @ g
    g[2::3] += 0.0 if gap is None else np.asarray(gap)
    # Pinocchio's G and g differ from the step's by rounding (~1e-16 relative): at a tol below that (hypothesis found
    # 4e-221) the reference's residual cannot reach it, so it solves to ROUNDED_TOL and the λ bound takes that tol
    ref_tol = max(tol, ROUNDED_TOL)
    ref = SOLVERS[solver](B @ G @ B.T, g, mus, exact=not relaxed,
                          options=Options(tol=ref_tol, max_iter=max(max_iter, 1000), omega=omega))
    assert ref.status == "converged"
    assert np.max(np.abs(r.lam - ref.lam)) <= 1e-6 * max(np.max(np.abs(ref.lam)), 1e-12) + 10 * ref_tol


def test_cli_step_generates_compiles_and_checks(tmp_path, capsys):
    from casadi_delassus.cli import main
    main(["step", "go1", "-c", "FL_foot:3d-world@-0.0173782,0,-0.0098993", "-c", "RR_foot:3d-world", "--solver", "pgs",
          "--mu", "0.5", "-o", str(tmp_path), "--cflags", TEST_LEVEL, "--samples", "8"])
    out = capsys.readouterr().out
    assert "_step: m = 6" in out and "PASS" in out


@pytest.mark.parametrize("args, words", [
    (["-c", "FL_foot:3d"], "not a world-aligned point contact"), (["-c", "FL_foot:3d-world", "--mu", "-1"], "mu"),
    (["-c", "nowhere:3d-world"], "nowhere"),
])
def test_cli_step_bad_input_is_one_line_and_status_2(tmp_path, capsys, args, words):
    from casadi_delassus.cli import main
    with pytest.raises(SystemExit) as e:
        main(["step", "go1", *args, "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.rglob("*.so"))


@pytest.mark.parametrize("contacts, chosen", [
    (["FL_foot:3d-world", "FR_foot:3d-world", "RL_foot:3d-world", "RR_foot:3d-world"], "pgs"),
    (["FL_foot:3d-world@0,0,0", "FL_foot:3d-world@0.01,0,0"], "pgs"),
    ([f"FL_foot:3d-world@{x},0,0" for x in (0.0, 0.01, 0.02)], "admm"),
])
def test_auto_solver_takes_admm_when_a_body_carries_more_than_two_contacts(contacts, chosen):
    from casadi_delassus.contact.step import auto_solver, check_contacts
    from casadi_delassus.model import load_robot
    robot = load_robot("go1")
    assert auto_solver(check_contacts(robot, contacts)) == chosen


@pytest.mark.parametrize("args, words", [
    (["ur5", "--contact"], "go1 and talos, not 'ur5'"), (["go1", "--contact", "-a", "aba"], "not with -c"),
])
def test_cli_bench_contact_bad_input_is_status_2(capsys, args, words):
    from casadi_delassus.cli import main
    with pytest.raises(SystemExit) as e:
        main(["bench", *args])
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_cli_bench_contact_times_go1s_problems(tmp_path, capsys, monkeypatch):
    """Pinocchio's routes (every ρ rule, Anderson or not) from C++ where its harness is already built (building it
    takes minutes), else the bench says why not and keeps the Python figure; MuJoCo's solvers and cones."""
    from casadi_delassus.cli import main
    from casadi_delassus.timing import contact_bench, pinocchio_harnesses
    cpp = pinocchio_harnesses.build_pinocchio_harness(only_cached=True) is not None
    if not cpp:
        monkeypatch.setattr(contact_bench, "pinocchio_cpp_problem", lambda: "not built (test)")
    main(["bench", "go1", "--contact", "--reps", "1", "--calls", "2", "-o", str(tmp_path / "gen"),
          "--results", str(tmp_path / "res")])
    text = (tmp_path / "res" / "contact.md").read_text()
    for row in ("| go1_stand | ours pgs |", "| go1_slide | MuJoCo Newton elliptic |", "| go1_slide | MuJoCo PGS pyramidal |",
                "| pgs | 1 |"):
        assert row in text
    assert ("| go1_slide | Pinocchio ADMM LINEAR, Anderson 5 |" in text) == cpp
    assert ("| go1_slide | Pinocchio admm Python |" in text) != cpp
    assert cpp or "Pinocchio C++ route not measured (not built (test))" in capsys.readouterr().err
    assert "auto's choice" in text and "talos" not in text


def test_a_max_iter_beyond_the_c_int_never_leaves_the_status_unwritten(steps, problems):
    """Issue 31, point 1: opts[] handed to the C step directly with max_iter = 3e9 (Python refuses it) once ran no
    iteration and left info[] as the caller's buffer had it (np.empty: a previous call's status).  The C writes info
    before anything else and reads a max_iter it cannot hold as 0: "max iterations" at iteration 0."""
    p = problems["go1_stand"]
    s = steps["admm", False]
    for solver in ("admm", "pgs"):
        for n in (3e9, 1e300, float("nan"), -5.0):
            opts = solver_options(1e-10, 10, solver, True)
            opts[1] = n
            q, v, tau, mu = (np.ascontiguousarray(x, dtype=float) for x in (p.q, p.v, p.tau, p.mu))
            v_next, lam, sigma, info = np.zeros(len(v)), np.zeros(12), np.zeros(12), np.full(N_INFO, 123.0)
            s._step(*map(c_pointer, (q, v, tau)), p.dt, c_pointer(mu), None, None, c_pointer(opts),
                    *map(c_pointer, (v_next, lam, sigma, info)))
            assert info[0] == 0 and info[4] == 1, (solver, n, info)     # 1: max iterations


def approach(sigma):
    """The fastest approach speed −σ_n of any contact (m/s; 0 when none closes): the test's own residual."""
    return max(0.0, -float(np.min(np.asarray(sigma)[2::3])))


@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("mu, tol", [(1e4, 1e-4), (1e6, 1e-6), (1e10, 1e-10)])
def test_a_large_mu_lets_no_sinking_foot_pass_the_compiled_step(steps, problems, solver, mu, tol):
    """Issue 31, point 2: go1 standing, feet closing at 0.18-0.25 m/s: λ = 0 passed as converged under μ = 1/tol
    while every foot sank.  A converged answer now closes no contact faster than tol (tests/contact/test_residuals.py: the
    reference's too)."""
    p = problems["go1_stand"]
    r = steps[solver, False](p.q, p.v, p.tau, dt=p.dt, mu=mu, tol=tol, max_iter=5000)
    assert approach(p.g) > 0.17 and r.status in ("converged", "max iterations", "NaN")
    if r.converged:
        assert approach(r.sigma) <= tol and np.max(np.abs(r.lam)) > 0


@pytest.mark.parametrize("change, words", [
    (lambda q: q.__setitem__(slice(3, 7), 3 * q[3:7]), "has norm 3"), (lambda q: q.__setitem__(slice(3, 7), 0.0), "norm 0"),
    (lambda q: q.__setitem__(slice(3, 7), 1.01 * q[3:7]), "has norm 1.01"),
])
def test_a_quaternion_off_norm_one_is_refused_by_the_rule_of_every_q(steps, problems, change, words):
    """Issue 31, point 8: a scaled or zero base quaternion moved v_next by 0.34-0.52 and was accepted; the C target
    refuses it (runtime/inputs.py unit_q, the one rule), and so does the step, single and batched."""
    p = problems["go1_slide"]
    q = p.q.copy()
    change(q)
    with pytest.raises(InputError, match=f"quaternion .*{words}") as e:
        steps["admm", False](q, p.v, p.tau, dt=p.dt)
    assert "\n" not in str(e.value)
    Q = np.tile(p.q, (3, 1))
    Q[2] = q
    with pytest.raises(InputError, match=f"row 2 of q: .*quaternion .*{words}"):
        steps["admm", False](Q, np.tile(p.v, (3, 1)), np.tile(p.tau, (3, 1)), dt=p.dt)


def test_a_nearly_unit_quaternion_is_normalised_as_the_c_target_does(steps, problems):
    from casadi_delassus.runtime.inputs import UNIT_TOL
    p = problems["go1_slide"]
    q = p.q.copy()
    q[3:7] *= 1 + 0.5 * UNIT_TOL
    s = steps["admm", False]
    assert np.array_equal(s(q, p.v, p.tau, dt=p.dt).v_next, s(p.q, p.v, p.tau, dt=p.dt).v_next)


@pytest.mark.parametrize("threads", [True, 1.5, "2", 2 ** 63, 0, -1, np.float64(2.0)])
def test_the_batch_takes_the_threads_the_door_takes(steps, problems, threads):
    """Issue 31, points 16-17: the step's batch took threads=True, 1.5, "2" and 2^63 (ctypes' traceback); one rule
    now, runtime/batch.py check_threads, as the generated functions' door; None is one thread per core there too."""
    p = problems["go1_slide"]
    Q, V, TAU = (np.tile(x, (3, 1)) for x in (p.q, p.v, p.tau))
    with pytest.raises(InputError, match="threads") as e:
        steps["admm", False](Q, V, TAU, dt=p.dt, threads=threads)
    assert "\n" not in str(e.value)
    one = steps["admm", False](Q, V, TAU, dt=p.dt, threads=1)
    assert np.array_equal(steps["admm", False](Q, V, TAU, dt=p.dt, threads=None).lam, one.lam)


@pytest.mark.parametrize("change, words", [
    (dict(dt=[1e-3, 1e-3]), "dt"), (dict(dt=np.full((3, 1), 1e-3)), "dt"), (dict(normals=np.ones((2, 4, 3))), "normals"),
    (dict(Q=np.ma.masked_array(np.zeros((3, 19)), mask=False)), "masked"), (dict(Q=np.zeros((0, 19))), "batch"),
    (dict(V=np.zeros((2, 18))), "v"), (dict(lam0=np.zeros((3, 11))), "lam0"), (dict(Q=[[1, 2], [3]]), "q"),
])
def test_batch_arguments_of_the_wrong_length_are_refused(steps, problems, change, words):
    """Issue 31, point 16: batch dt or normals of the wrong length ended in numpy's broadcast traceback."""
    p = problems["go1_slide"]
    args = dict(Q=np.tile(p.q, (3, 1)), V=np.tile(p.v, (3, 1)), TAU=np.tile(p.tau, (3, 1)), dt=p.dt)
    args.update(change)
    with pytest.raises(InputError, match=words) as e:
        steps["admm", False](args.pop("Q"), args.pop("V"), args.pop("TAU"), **args)
    assert "\n" not in str(e.value)
    per_state = steps["admm", False](np.tile(p.q, (2, 1)), np.tile(p.v, (2, 1)), np.tile(p.tau, (2, 1)),
                                     dt=[p.dt, 2 * p.dt], normals=np.tile([0.0, 0.0, 1.0], (2, 4, 1)))
    assert np.array_equal(per_state.lam[1], steps["admm", False](p.q, p.v, p.tau, dt=2 * p.dt).lam)


@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    """go1 on three and four feet (m = 9, 12; the dense route): compiled loops of the sizes of the saved G1 steps,
    ADMM and auto (PGS on these sets, then ADMM where PGS does not converge); the solver is a run-time option."""
    out = tmp_path_factory.mktemp("loops")
    feet = {"edge": ("FL", "FR", "RL"), "lift": ("FL", "FR", "RL", "RR")}
    return {(case, solver): contact_step("go1", [f"{f}_foot:3d-world" for f in names], solver=solver, out_dir=out,
                                         cflags=TEST_CFLAGS, linear_solve="dense")
            for case, names in feet.items() for solver in ("admm", "auto")}


def topple(case):
    """A saved step of a toppling G1 (tests/data/g1_topple.npz): (G, g, μ, λ₀)."""
    from pathlib import Path
    d = np.load(Path(__file__).parents[1] / "data" / "g1_topple.npz")
    return tuple(d[f"{case}_{x}"] for x in ("G", "g", "mu", "lam0"))


@pytest.mark.parametrize("solver", ["admm", "auto"])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("case", ["edge", "lift"])
def test_the_compiled_loop_solves_a_toppling_humanoid_within_the_default_budget(loops, case, warm, solver):
    """Issue 31, point 18, in C: the saved G1 steps ('edge' took plain ADMM 6,705 iterations, and PGS does not
    finish it in 20,000) through the compiled loop of a robot of the same m (solve_problem: the loop alone, which is
    the same code for any robot); σ equals the reference's (λ is not unique: G is singular along the toe edge)."""
    from casadi_delassus.contact import pgs_then_admm
    G, g, mu, lam0 = topple(case)
    start = lam0 if warm else None
    r = loops[case, solver].solve_problem(G, g, mu, lam0=start)
    assert loops[case, solver].solver == ("admm" if solver == "admm" else "pgs")
    assert r.converged and r.iterations <= (1000 if solver == "admm" else 2000)
    ref = (SOLVERS["admm"] if solver == "admm" else pgs_then_admm)(G, g, mu, lam0=start)
    assert ref.converged        # iterations differ: Anderson's least squares sees the two loops' rounding apart
    assert np.max(np.abs(r.sigma - ref.sigma)) <= 1e-9
    assert approach(r.sigma) <= 1e-10 and np.allclose(r.sigma, G @ r.lam + g, rtol=0, atol=1e-12)


def test_solve_problem_checks_its_problem(loops):
    s = loops["edge", "admm"]
    G, g, mu, _ = topple("edge")
    for bad, words in [(dict(G=G[:8, :8]), "G"), (dict(G=G + np.triu(np.ones_like(G), 1)), "symmetric"),
                       (dict(g=np.full(9, np.nan)), "g"), (dict(mu=-1.0), "mu"), (dict(max_iter=2 ** 40), "max_iter")]:
        args = dict(G=G, g=g, mu=mu) | bad
        with pytest.raises(InputError, match=words):
            s.solve_problem(**args)
