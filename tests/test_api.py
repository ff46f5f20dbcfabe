"""The Python API: load_robot / generate / load, and its input checks."""
import numpy as np
import pytest

import casadi_delassus as cd

from cli_runner import run_cli


def test_generate_then_load_from_disk(out_dir):
    robot = cd.load_robot("solo12")
    f = cd.generate(robot, "4F3", out_dir=out_dir)
    g = cd.load(f.manifest_path)
    q = robot.random_q(np.random.default_rng(1))
    assert np.array_equal(f(q), g(q))
    assert g.op_count["instructions"] == f.manifest["op_count"]["instructions"]
    assert cd.load(f.so_path).manifest["function"] == f.manifest["function"]


def test_wrong_inputs_are_named(out_dir):
    robot = cd.load_robot("solo12")
    f = cd.generate(robot, "4F3", out_dir=out_dir)
    with pytest.raises(cd.InputError, match="q has 3 entries, robot 'solo12' needs nq = 19"):
        f(np.zeros(3))
    with pytest.raises(cd.InputError, match="unexpected inputs"):
        f(np.zeros(19), K_foo=np.eye(6))
    with pytest.raises(cd.DelassusError, match="no generated function"):
        cd.load(out_dir / "nothing-here.json")


def test_runtime_input_shape_is_checked(out_dir):
    robot = cd.load_robot("go1")
    f = cd.generate(robot, ["FL_foot:3d-input"], out_dir=out_dir)
    with pytest.raises(cd.InputError, match="missing input K_FL_foot"):
        f(robot.neutral_q())
    with pytest.raises(cd.InputError, match=r"K_FL_foot has shape \(6, 6\), expected \(3, 6\)"):
        f(robot.neutral_q(), K_FL_foot=np.eye(6))


def test_one_default_algorithm_everywhere(out_dir):
    """generate, casadi_function and the CLI all default to ``auto`` (the cheapest Delassus
    algorithm), so Python and the command line build the same function."""
    from casadi_delassus.codegen.trace import choose_cheapest
    from casadi_delassus.opcount import count_ops
    robot = cd.load_robot("solo12")
    f = cd.generate(robot, "4F3", out_dir=out_dir)
    assert f.manifest["algorithm"] == "auto"
    cs, _ = cd.constraint_set(robot, "4F3")
    chosen, counts, _ = choose_cheapest(robot, cs)
    assert f.manifest["auto"]["chosen"] == chosen
    assert count_ops(cd.casadi_function(robot, "4F3"))["instructions"] == counts[chosen]
    run = run_cli("generate", "solo12", "-s", "4F3", "-o", out_dir)
    assert run.returncode == 0, run.stderr
    assert str(f.manifest_path.with_suffix("")) in run.stdout and f"-> {chosen}:" in run.stdout


def test_the_solver_defaults_to_auto_everywhere():
    """Issue 34 point 4: one default, `auto`, in every public entry that takes a contact solver (as `step` and
    `simulate` on the command line, tests/cli/test_step.py)."""
    import inspect
    for entry in (cd.contact_step, cd.ContactStep, cd.simulate):
        assert inspect.signature(entry).parameters["solver"].default == "auto", entry
