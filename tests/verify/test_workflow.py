"""verify/workflow.py: the check workflow's typed rows, which `check` prints and `api.check` returns the outcomes of
(issue 35 point 6): named fields, not tuples read by position; a corrupted function fails its row; the CLI's
table is the rows' cells."""
import functools

import numpy as np
import pytest

from casadi_delassus import api
from casadi_delassus.codegen.target import Target
from casadi_delassus.verify import oracles, workflow
from casadi_delassus.verify.check import DEFAULT_TOL

ROBOT, SPECS = "chain:n=3", ["link3:3d"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("workflow")
    robot = api.load_robot(ROBOT)
    cs, scenario = api.constraint_set(robot, SPECS)
    generate = functools.partial(api.generate, out_dir=out)
    return robot, cs, scenario, generate


def test_rows_are_typed_and_pass(made):
    robot, cs, scenario, generate = made
    sessions = {"numpy": oracles.get_oracle("numpy").session(robot, cs)}
    rows, notes = workflow.check_scenario(robot, cs, scenario, cs, ["naive", "pv_osim"], sessions, 5, DEFAULT_TOL,
                                          generate, Target())
    assert [(r.algorithm, r.oracle, r.result) for r in rows] == [("naive", "numpy", "ok"), ("pv_osim", "numpy", "ok")]
    row = rows[0]
    assert row.passed and row.m == cs.m == 3 and row.output in row.outcome and row.error <= DEFAULT_TOL
    assert row.cells()[:4] == [robot.name, scenario, "naive", "numpy"] and len(row.cells()) == len(workflow.HEADERS)


def test_a_wrong_function_fails_its_row(made):
    robot, cs, scenario, generate = made
    f = generate(robot, cs, "naive")
    outputs = f.outputs
    f.outputs = lambda *a, **k: {n: v * (1 + 1e-6) for n, v in outputs(*a, **k).items()}
    sessions = {"numpy": oracles.get_oracle("numpy").session(robot, cs)}
    [row] = workflow.oracle_rows(f, sessions, 5, DEFAULT_TOL, algorithm="naive")
    assert row.result == "FAIL" and not row.passed and row.error > 1e-7


def test_api_check_returns_the_rows_outcomes(made):
    """api.check and the workflow compare alike: the same errors for the same samples and seed."""
    robot, cs, scenario, generate = made
    f = generate(robot, cs, "naive")
    outcomes = api.check(f, "numpy", samples=4, seed=3)
    [row] = workflow.oracle_rows(f, {"numpy": oracles.get_oracle("numpy").session(robot, cs)}, 4, DEFAULT_TOL, seed=3)
    assert {k: c.error for k, c in outcomes["numpy"].items()} == {k: c.error for k, c in row.outcome.items()}


def test_an_oracle_that_failed_fails_and_a_refused_algorithm_is_skipped(made):
    robot, cs, scenario, generate = made
    from casadi_delassus.errors import DelassusError
    rows, _ = workflow.check_scenario(robot, cs, scenario, cs, ["naive"], {"pinocchio": DelassusError("no model")}, 2,
                                      DEFAULT_TOL, generate, Target())
    assert rows[0].result == "FAIL" and rows[0].others == "oracle failed: no model"
    joint = api.constraint_set(robot, ["JOINT:link2_joint"])[0]
    rows, _ = workflow.check_scenario(robot, joint, "j", ["JOINT:link2_joint"], ["pv_osim"], {}, 2, DEFAULT_TOL, generate,
                                      Target())
    assert rows[0].result == "skipped" and rows[0].passed


def test_derivative_rows_are_typed(made):
    robot, cs, scenario, generate = made
    rows = workflow.check_derivatives(robot, cs, scenario, cs, ["naive"], ["jvp"], None, "auto", 3, 1e-6, generate)
    assert rows[0].derivative == "jvp" and rows[0].passed and np.isfinite(rows[0].error)
    assert len(rows[0].cells()) == len(workflow.derivative_headers(3))
