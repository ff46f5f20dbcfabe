"""The command line: listing, counting, generating, checking, and one-line errors (exit 2)."""
import json
import subprocess
import sys

import pytest

from conftest import ANCHOR_JSON

needs_anchor = pytest.mark.skipif(not ANCHOR_JSON.is_file(), reason="anchor JSON not available")


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "casadi_delassus", *args], capture_output=True, text=True, env=env)


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
