"""The command line: listing, counting, generating, checking, and one-line errors (exit 2)."""
import json
import subprocess
import sys

import pytest

from cli_runner import run_cli as run
from conftest import ANCHOR_JSON

needs_anchor = pytest.mark.skipif(not ANCHOR_JSON.is_file(), reason="anchor JSON not available")


def started(*args, cwd, **popen):
    """The command in a new interpreter, for what a forked one cannot show: PYTHONPATH read at the start, the limits
    a process is started with (on its own files only, not on the runner's capture files)."""
    return subprocess.run([sys.executable, "-m", "casadi_delassus", *args], capture_output=True, text=True, cwd=cwd,
                          **popen)


def in_process(*args):
    """(exit status, stdout, stderr) of the command run by ``main`` in this process, as the console script runs it
    (its one-line errors and exit statuses included), without a new interpreter's start-up."""
    import contextlib
    import io

    from casadi_delassus.cli import main
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def test_robots_lists_registry_with_sizes():
    r = run("robots")
    assert r.returncode == 0, r.stderr
    talos = next(l for l in r.stdout.splitlines() if l.startswith("talos "))
    assert talos.split()[1:5] == ["51", "50", "45", "12"] and "2F+2H" in talos


@needs_anchor
def test_count_json_on_the_papers_talos_model():
    r = run("count", str(ANCHOR_JSON), "-c", "leg_left_6_link:6d-input", "-c", "leg_right_6_link:6d-input",
            "-a", "naive", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["nq"], out["nv"], out["n_bodies"], out["m"]) == (51, 50, 45, 12)
    assert out["constraints"][0] == {"link": "leg_left_6_link", "type": "6d-input", "rows": 6}
    naive = out["algorithms"]["naive"]
    assert naive["instructions"] > naive["flops"] > 0 and naive["cse"] is True
    assert set(naive["ops"]) >= {"add", "mul", "div", "sqrt", "neg"}


@pytest.mark.parametrize("spec", ["chain:n=5", "stem:n=4,branches=2,length=3", "kchain:k=3", "ladder:rungs=2"])
def test_count_synthetic_specs(spec):
    """The default algorithm is auto: its choice on stderr, its counts on stdout."""
    r = run("count", spec, "--format", "csv")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    chosen = r.stderr.split("auto -> ")[1].split(":")[0]
    assert header.startswith("algorithm,instructions") and row.startswith(chosen + ",")


def test_generate_and_check_commands(tmp_path):
    r = run("generate", "go2", "-s", "2F3", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "go2" / "2F3" / "auto.so").is_file()        # the default algorithm
    r = run("check", "go2", "-s", "2F3", "-o", str(tmp_path), "--samples", "100")
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["count", "taloss"], "unknown robot 'taloss'; did you mean 'talos'"),
    (["count", "/nonexistent/robot.urdf"], "model file not found"),
    (["count", "talos", "-c", "left_sole_lnk:6d"], "unknown link or frame of robot 'talos' 'left_sole_lnk'; did you mean 'left_sole_link'"),
    (["count", "talos", "-c", "left_sole_link:7d"], "bad constraint spec 'left_sole_link:7d': unknown type '7d'"),
    (["count", "talos", "-c", "left_sole_link"], "bad constraint spec 'left_sole_link': expected LINK:TYPE"),
    (["count", "talos", "-c", "left_sole_link:3d@1,2"], "offset must be three numbers"),
    (["count", "talos", "-a", "navie"], "unknown algorithm 'navie'; did you mean 'naive'"),
    (["count", "talos", "-s", "2FF"], "unknown scenario of robot 'talos' '2FF'"),
    (["count", "chain:n=0"], "n must be >= 1"),
])
def test_bad_input_is_one_line_exit_2(args, words):
    r = run(*args)
    assert r.returncode == 2
    assert words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_malformed_and_non_positive_definite_models(tmp_path):
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'></robot")
    r = run("count", str(bad), "-c", "a:6d")
    assert r.returncode == 2 and "malformed URDF" in r.stderr and "Traceback" not in r.stderr
    zero = tmp_path / "zero.urdf"
    zero.write_text("""<robot name="z">
  <link name="base"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="finger"><inertial><mass value="0"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="base"/><child link="finger"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    r = run("count", str(zero), "-c", "finger:3d")
    assert r.returncode == 2 and "the mass matrix is singular: joint 'j' (body 'finger') carries no inertia" in r.stderr


def test_missing_compiler_leaves_nothing_behind(tmp_path):
    import os
    env = dict(os.environ, CC="no-such-compiler-xyz")
    r = run("generate", "go1", "-o", str(tmp_path / "out"), env=env)
    assert r.returncode == 2 and "C compiler 'no-such-compiler-xyz'" in r.stderr and "not found" in r.stderr
    assert not (tmp_path / "out").exists()


def test_failed_compile_leaves_nothing_behind(tmp_path):
    r = run("generate", "go1", "-o", str(tmp_path / "out"), "--cflags", "-O2 -fno-such-flag-xyz")
    assert r.returncode == 2 and "compiling auto.c failed" in r.stderr
    assert not (tmp_path / "out").exists()


def test_no_compiler_at_all_is_named(monkeypatch):
    import shutil

    from casadi_delassus.codegen.build import find_compiler
    from casadi_delassus.errors import CompilerError
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(CompilerError, match="no C compiler found"):
        find_compiler()


def test_demo_runs_the_cheapest_algorithm_on_talos(tmp_path):
    r = run("demo", "-o", str(tmp_path), "--samples", "20")
    assert r.returncode == 0, r.stderr
    assert "algorithm: auto -> " in r.stdout and "max relative error vs NumPy reference over 20 random q" in r.stdout
    assert (tmp_path / "talos" / "2F" / "auto.so").is_file()


@pytest.mark.parametrize("args, words", [(["--batch", "0"], "0 is not in the range x>=1"),
                                         (["--batch", "8", "-a", "naive", "-a", "pv_osim"], "--batch times one algorithm")])
def test_bench_batch_option_errors(args, words):
    r = run("bench", "go1", "-s", "4F3", *args)
    assert r.returncode == 2 and words in r.stderr


GO1_FEET = [a for leg in ("FL", "FR", "RL", "RR") for a in ("--contact", f"{leg}_foot@-0.0173782,0,-0.0098993")]


def _one_line_exit_2(code, out, err, words):
    """A refusal: exit 2, one line on stderr holding ``words``, no traceback (``out`` unused: what a caller may check)."""
    assert code == 2 and words in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [
    (["step", "go1", "-c", "FL_foot:3d-world", "--samples", "0"], "0 is not in the range 1<=x<=10000"),
    (["step", "go1", "-c", "FL_foot:3d-world", "--samples", "-3"], "-3 is not in the range 1<=x<=10000"),
    (["step", "go1", "-c", "FL_foot:3d-world", "--samples", "1000000000"], "1000000000 is not in the range"),
    (["check", "go1", "--samples", "10000000000000"], "10000000000000 is not in the range 1<=x<=100000"),
])
def test_samples_out_of_range_are_refused(args, words):
    """Issue 31 point 12: `step --samples 0` printed PASS having compared nothing, and `step`/`check` took any count
    (10⁹ or 10¹³: hours to years of work): refused in one line before any build; the range is in --help."""
    _one_line_exit_2(*in_process(*args), words)
    assert "1 to 10,000" in in_process("step", "--help")[1].replace("\n", " ")


@pytest.mark.parametrize("args, words", [
    (["--height", "nan"], "ground height must be a finite number, got nan"),
    (["--height", "-inf"], "ground height must be a finite number, got -inf"),
    (["--normal", "0,0,2"], "ground normal must be three finite numbers of norm 1"),
    (["--mu", "nan"], "friction μ must be finite"),
    (["--dt", "1e-300"], "T / dt = 1e+300 steps, more than the 10,000,000 one rollout takes"),
    (["-T", "0"], "less than half a step"),
    (["-T", "0.0004"], "less than half a step"),
    (["-T", "1e300"], "more than the 10,000,000 one rollout takes"),
    (["--baumgarte", "2"], "baumgarte β must be in [0, 1]"),
    (["--kp", "nan", "--kd", "1"], "--kp: expected a finite number, got 'nan'"),
    (["--tol", "nan"], "tol: must be finite and > 0"),
    (["--drop", "inf"], "the clearance (drop height) must be a finite number, got inf"),
])
def test_simulate_refuses_in_one_line_before_building(tmp_path, monkeypatch, args, words):
    """Issue 31 points 10 and 13: ground heights NaN or ±inf (the robot fell through, "free", exit 0), a normal that is
    not unit (normalised silently), dt = 1e-300 (ran for ever), T = 0, T < dt/2, T = 1e300 (tracebacks): one line,
    exit 2, nothing built or written."""
    monkeypatch.chdir(tmp_path)
    _one_line_exit_2(*in_process("simulate", "go1", *GO1_FEET, *args, "-o", "out"), words)
    assert not any(tmp_path.iterdir())


def _final_gaps(csv_path):
    """The candidates' gaps at the last step of a rollout.csv."""
    import csv
    with open(csv_path) as f:
        rows = list(csv.reader(f))
    return [float(x) for name, x in zip(rows[0], rows[-1]) if name.endswith(".gap")]


def test_simulate_baumgarte_and_out_dir_reach_the_compiled_rollout(tmp_path):
    """Issue 31 points 3 and 17: `simulate --baumgarte` reaches the compiled step (it ran bit-identical to 0): go1
    dropped 1 cm under a PD ends within 1e-6 m of the ground with the default β, 0.15 mm inside with β = 0; --out-dir
    puts the build there instead of ./codegen_out."""
    common = ["simulate", "go1", *GO1_FEET, "-T", "0.3", "--drop", "0.01", "--kp", "60", "--kd", "2",
              "--out-dir", str(tmp_path / "builds")]
    rest = run(*common, "-o", "rest", cwd=tmp_path)
    deep = run(*common, "--baumgarte", "0", "-o", "deep", cwd=tmp_path)
    assert rest.returncode == deep.returncode == 0, rest.stderr + deep.stderr
    assert min(_final_gaps(tmp_path / "rest" / "rollout.csv")) >= -1e-6
    assert min(_final_gaps(tmp_path / "deep" / "rollout.csv")) < -1e-4
    assert list((tmp_path / "builds").glob("*/rollout-*/rollout_*.so")) and not (tmp_path / "codegen_out").exists()


def _linear_solves(builds):
    """The ``linear_solve`` of each manifest under ``builds`` (the compiled steps' and rollouts')."""
    return sorted(json.loads(p.read_text()).get("linear_solve") for p in builds.rglob("*.json"))


@pytest.mark.parametrize("pd", [True, False])
def test_simulate_linear_solve_reaches_the_build(tmp_path, pd):
    """`simulate --linear-solve` (choices: codegen/contact_step.py LINEAR_SOLVES, as `step --linear-solve`) builds the
    C rollout of a PD (``pd``) or the per-step loop's step on that linear solve; left out, the C rollout keeps its
    dense default; on the reference step or an MJCF model it is one line, exit 2, before anything is built."""
    kp = ["--kp", "1"] if pd else []
    for given, built in (("matrix_free", "matrix_free"), ("dense", "dense"), (None, "dense" if pd else None)):
        builds = tmp_path / f"builds-{given}"
        option = ["--linear-solve", given] if given else []
        code, _, err = in_process("simulate", "chain:n=3", "-c", "link3", "-T", "0.005", *kp, *option, "--out-dir",
                                  str(builds), "-o", str(tmp_path / "out"))
        assert code == 0, err
        if built:
            assert _linear_solves(builds) == [built]
    refused = tmp_path / "refused"
    _one_line_exit_2(*in_process("simulate", "chain:n=3", "-c", "link3", "--step", "reference", "--linear-solve",
                                 "dense", "--out-dir", str(refused), "-o", str(refused)), "linear_solve apply to step='compiled'")
    model = tmp_path / "ball.xml"
    model.write_text('<mujoco><worldbody><body><joint type="slide"/><geom size="0.1"/></body></worldbody></mujoco>')
    _one_line_exit_2(*in_process("simulate", str(model), "--linear-solve", "dense", "-o", str(refused)),
                     "--linear-solve: an MJCF model takes these from its own file")
    assert not refused.exists()


def test_simulate_without_matplotlib_keeps_the_csv(tmp_path):
    """Issue 31 point 15: without matplotlib the CSV is written, then one line says there is no figure, exit 2 (it was
    a traceback after the CSV, exit 1: the code for "stopped early")."""
    import os
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib blocked by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(blocker.parent), os.environ.get("PYTHONPATH")])))
    r = started("simulate", "go1", *GO1_FEET, "-T", "0.005", "--drop", "0.5", "--step", "reference", "-o", "out",
                env=env, cwd=tmp_path)
    _one_line_exit_2(r.returncode, r.stdout, r.stderr, "no figure: matplotlib is not installed")
    assert "5 steps of 0.001 s, free" in r.stdout and "wrote out/rollout.csv" in r.stderr
    assert (tmp_path / "out" / "rollout.csv").is_file() and not (tmp_path / "out" / "rollout.png").exists()


def test_simulate_on_a_full_disk_is_one_line(tmp_path):
    """Issue 31 point 15: a CSV the disk cannot take (here: a file-size limit of 4 KiB, EFBIG as ENOSPC would be) is
    one line naming the file, exit 2, no half-written file; the rollout's summary was printed before (it was a
    traceback that lost it)."""
    import resource
    import signal

    def small_files():          # in the child: writes beyond 4 KiB fail with EFBIG instead of killing it (SIGXFSZ)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    r = started("simulate", "go1", *GO1_FEET, "-T", "0.02", "--drop", "0.5", "--step", "reference", "-o", "out",
                cwd=tmp_path, preexec_fn=small_files)
    _one_line_exit_2(r.returncode, r.stdout, r.stderr, "cannot write out/rollout.csv: File too large")
    assert "20 steps of 0.001 s, free" in r.stdout and list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("command", ["links", "simulate"])
def test_a_name_no_file_can_have_is_one_line(command):
    """A robot name of 5,000 characters: Path's tests raised OSError (ENAMETOOLONG) through load_robot, a traceback."""
    code, _, err = in_process(command, "a" * 5000)
    assert code == 2 and err.startswith("error: unknown robot 'aaa") and len(err.strip().splitlines()) == 1, err[-300:]
