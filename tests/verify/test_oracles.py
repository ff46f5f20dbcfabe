"""Issue 13, point 6: `check --oracle numpy|pinocchio` (repeatable or a comma list) and the
oracle registry of verify/oracles.py.  Pinocchio reads its own model of the same file, so it
catches a parse difference the NumPy reference shares (done-when 5: Bolt with the old
mass-0 bug reintroduced passes the NumPy check and fails Pinocchio's); outputs an oracle
cannot compare are reported n/a with the reason, never as passed; formats Pinocchio cannot
read itself say that the model was built from our parse."""
from pathlib import Path

import pytest
from click.testing import CliRunner

import casadi_delassus as cd
from casadi_delassus import cli
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.trace import TracedFunction as Traced
from casadi_delassus.errors import DelassusError
from casadi_delassus.model import urdf
from casadi_delassus.verify import oracles
from casadi_delassus.verify.check import compare

from cli_runner import run_cli
from conftest import model_for

pytest.importorskip("pinocchio")
BOLT = "erd:bolt_description/robots/bolt.urdf"


def rows(result, robot):
    return {line.split()[3]: line for line in result.stdout.splitlines() if line.startswith(robot + " ")}


def zero_mass_inertials_dropped(monkeypatch):
    """The loader's old behaviour: an <inertial> with mass 0 was dropped with its rotational
    inertia (Pinocchio keeps it; Bolt's feet have mass 0 and a nonzero inertia)."""
    add = urdf._MergedInertia.add
    monkeypatch.setattr(urdf._MergedInertia, "add", lambda self, mass, com, inertia: None if mass == 0 else
                        add(self, mass, com, inertia))


def test_pinocchio_catches_a_parse_difference_numpy_shares(monkeypatch, tmp_path):
    """Done-when 5: `check --oracle numpy,pinocchio` on Bolt with the zero-mass bug reintroduced."""
    path = model_for(BOLT).source
    args = ["check", path, "-c", "FL_FOOT:3d", "-c", "FR_FOOT:3d", "-a", "pv_osim", "-a", "aba", "-o", str(tmp_path),
            "--samples", "10", "--oracle", "numpy,pinocchio"]
    good = CliRunner().invoke(cli.cli, args)
    assert good.exit_code == 0, good.output
    zero_mass_inertials_dropped(monkeypatch)
    bad = CliRunner().invoke(cli.cli, args)
    assert bad.exit_code == 1, bad.output
    lines = [line for line in bad.stdout.splitlines() if line.startswith("bolt ")]
    numpy_rows = [line for line in lines if line.split()[3] == "numpy"]
    pin_rows = [line for line in lines if line.split()[3] == "pinocchio"]
    assert len(numpy_rows) == len(pin_rows) == 2
    assert all(" ok " in line for line in numpy_rows) and all("FAIL" in line for line in pin_rows)
    err = float(next(line for line in pin_rows if " pv_osim " in line).split()[7])
    assert err > 1e-4                                  # 1.8e-3 measured: not a rounding difference


def test_default_oracles_by_format():
    assert oracles.oracle_names([], model_for("go1")) == ["numpy", "pinocchio"]
    assert oracles.oracle_names([], model_for("cassie")) == ["numpy", "pinocchio"]
    assert oracles.oracle_names([], cd.load_robot("chain:n=3")) == ["numpy"]
    assert oracles.oracle_names(["pinocchio", "numpy,pinocchio"], cd.load_robot("chain:n=3")) == ["pinocchio", "numpy"]
    with pytest.raises(DelassusError, match=r"unknown oracle 'mujoko'.*the oracles: numpy, pinocchio"):
        oracles.oracle_names(["mujoko"], model_for("go1"))


def test_unknown_oracle_is_one_line(tmp_path):
    r = CliRunner().invoke(cli.cli, ["check", "go1", "--oracle", "pinochio", "-o", str(tmp_path)])
    assert r.exit_code != 0 and "unknown oracle 'pinochio'; did you mean 'pinocchio'" in str(r.exception or r.output)


def test_shared_parse_is_said_and_loops_compare():
    """Cassie (SDF, loop rows): Pinocchio through the model built from our parse, said so."""
    robot = model_for("cassie")
    cs, _ = constraint_set(robot, "loops")
    session = oracles.get_oracle("pinocchio").session(robot, cs)
    assert "built from our parse" in session.notes[0]
    out = compare(Traced(robot, cs, "naive"), robot, cs, samples=10, oracle=session)
    assert out.passed and out["delassus"].error < 1e-12


def test_outputs_an_oracle_cannot_compare_are_named():
    robot = model_for("go1")
    cs, _ = constraint_set(robot, "4F3")
    for name in ("numpy", "pinocchio"):
        out = compare(Traced(robot, cs, "pv_osim_fast"), robot, cs, samples=3,
                      oracle=oracles.get_oracle(name).session(robot, cs))
        assert set(out) == {"delassus", "osim"} and set(out.not_applicable) == {"Lb_ldl", "K_b", "schur_ldl"}
        assert all("no counterpart" in v for v in out.not_applicable.values())
    # redundant points: Λ does not exist; reported n/a by both oracles, Λ⁻¹ still compared
    cs, _ = constraint_set(robot, ["FL_foot:3d", "FL_foot:3d-world"])
    f = Traced(robot, cs, "pv_osim", osim=True)
    for name in ("numpy", "pinocchio"):
        out = compare(f, robot, cs, samples=3, oracle=oracles.get_oracle(name).session(robot, cs))
        assert "delassus" in out and "osim" in out.not_applicable and "no unique answer" in out.not_applicable["osim"]


def test_every_kind_of_row_against_pinocchio():
    """Local, world-aligned, seeded, runtime-input and joint rows in one set, every family."""
    robot = model_for("go1")
    cs, _ = constraint_set(robot, ["FL_foot:3d@0.01,0,0", "FR_foot:3d-world", "RL_calf:random6", "RR_calf:3d-input",
                                   "base:6d-world", "JOINT:FL_hip_joint"])
    session = oracles.get_oracle("pinocchio").session(robot, cs)
    for algo in ("naive", "ltl_osim", "delassus_apply", "damped_inverse_apply"):
        out = compare(Traced(robot, cs, algo), robot, cs, samples=5, oracle=session)
        assert out.passed and not out.not_applicable, (algo, out, out.not_applicable)
    cs, _ = constraint_set(robot, ["FL_foot:3d@0.01,0,0", "FR_foot:3d-world", "RL_calf:random6", "RR_calf:3d-input"])
    session = oracles.get_oracle("pinocchio").session(robot, cs)
    for algo in ("pv", "pv_soft", "aba", "rnea"):
        out = compare(Traced(robot, cs, algo), robot, cs, samples=5, oracle=session)
        assert out.passed and not out.not_applicable, (algo, out, out.not_applicable)


def test_a_different_parse_fails_instead_of_passing():
    """Pinocchio's own model with other sizes than ours: the session refuses, `check` fails."""
    robot = model_for("go1")
    robot.model_file = model_for("erd:bolt_description/robots/bolt.urdf").source      # another file
    cs, _ = constraint_set(robot, "4F3")
    with pytest.raises(DelassusError, match="the two parses differ"):
        oracles.get_oracle("pinocchio").session(robot, cs)


def test_python_check(out_dir):
    f = cd.generate("go1", "4F3", "pv_osimr", out_dir=out_dir)
    out = cd.check(f, samples=5)
    assert set(out) == {"numpy", "pinocchio"} and all(o.passed for o in out.values())


def test_check_an_mjcf_model_against_mujoco_and_refuse_pinocchio_for_it(tmp_path):
    """The MuJoCo oracle is registered: `check` on gymnasium's ant asks it by default and
    passes; Pinocchio cannot judge an MJCF model: one line, exit 2."""
    pytest.importorskip("mujoco")
    gymnasium = pytest.importorskip("gymnasium")
    ant = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "ant.xml"
    base = ["check", ant, "-c", "body4:3d", "-c", "body7:3d", "-a", "pv_osim", "--samples", "10", "-o", tmp_path,
            "--jobs", "1"]
    ok = run_cli(*base)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "vs mujoco" in ok.stderr and "vs numpy" in ok.stderr
    bad = run_cli(*base, "--oracle", "pinocchio")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "mjcf" in bad.stderr.lower() or "mujoco" in bad.stderr.lower()
