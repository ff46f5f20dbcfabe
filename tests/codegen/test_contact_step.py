"""ADMM's linear solve in the compiled step (codegen/contact_step.py ``linear_solve``): the staged
matrix-free damped inverse gives the dense LDLᵀ route's answer to the solver tolerance, on go1's
four feet and on three points per foot (m = 36, G singular as on Talos's soles), with and
without run-time normals; ``auto`` takes the route with fewer instructions and the manifest says
which was built."""
from pathlib import Path

import numpy as np
import pytest

from casadi_delassus import contact_step
from casadi_delassus.codegen import contact_step as step_module
from casadi_delassus.contact.delassus_operator import OPERATORS
from casadi_delassus.contact.step import prep_function, step_trace
from casadi_delassus.registry import get_algorithm
from casadi_delassus.errors import InputError

from conftest import TEST_CFLAGS

pin = pytest.importorskip("pinocchio")
from casadi_delassus.verify import contact_problems as cp  # noqa: E402

TOL = 1e-10
TEMPLATE_DIR = Path(step_module.__file__).parent / "templates"


def three_per_foot(specs):
    """Each foot's contact and two more points 1 cm away on the same body: 3 contacts per body."""
    out = []
    for s in specs:
        link, point = s.split(":3d-world@")
        x, y, z = map(float, point.split(","))
        out += [s, cp.spec(link, (x + 0.01, y, z)), cp.spec(link, (x, y + 0.01, z))]
    return out


@pytest.fixture(scope="module")
def problem():
    return cp.build("go1_slide")


@pytest.fixture(scope="module", params=["four feet", "three per foot"])
def routes(request, problem, tmp_path_factory):
    out = tmp_path_factory.mktemp("linear_solve")
    specs = problem.specs if request.param == "four feet" else three_per_foot(problem.specs)
    return {r: contact_step("go1", specs, solver="admm", mu=0.1, out_dir=out, cflags=TEST_CFLAGS, delassus="pv_osim",
                            linear_solve=r) for r in ("dense", "matrix_free")}


@pytest.mark.parametrize("normal", [None, (0.1, -0.2, 1.0)])
def test_matrix_free_route_gives_the_dense_routes_answer(routes, problem, normal):
    dense, free = routes["dense"], routes["matrix_free"]
    assert (dense.manifest["linear_solve"], free.manifest["linear_solve"]) == ("dense", "matrix_free")
    normals = None if normal is None else np.tile(np.array(normal) / np.linalg.norm(normal), (dense.nc, 1))
    a, b = (s(problem.q, problem.v, problem.tau, dt=problem.dt, tol=TOL, normals=normals) for s in (dense, free))
    assert a.converged and b.converged
    assert max(b.residuals.primal, b.residuals.dual, b.residuals.complementarity) <= TOL
    # G is singular with three points per foot: λ is not unique, the velocities are
    assert np.max(np.abs(a.sigma - b.sigma)) <= 1e-9
    assert np.max(np.abs(a.v_next - b.v_next)) <= 1e-8
    assert np.max(np.abs(a.lam - b.lam)) <= 1e-6 * np.max(np.abs(a.lam)) or dense.nc > 4


def test_auto_takes_the_route_with_fewer_instructions(problem):
    from casadi_delassus.contact.step import check_contacts
    from casadi_delassus.model import load_robot
    robot = load_robot("go1")
    cs = check_contacts(robot, problem.specs)
    parts = step_module.step_parts(robot, cs, "t", "pv_osim", "auto")
    trace = step_trace(robot, cs, get_algorithm("pv_osim").fn)
    operators = {route: op(robot, cs, "t") for route, op in OPERATORS.items()}
    preps = {route: prep_function(trace, "t", op) for route, op in operators.items()}
    costs = step_module.linear_solve_costs(operators, preps)
    assert parts.operator.route == min(costs, key=costs.get) == "dense"    # go1's m = 12: LDLᵀ of a 12×12 is cheap
    assert costs["matrix_free"] > costs["dense"] > 0
    # prep has the chosen operator's outputs alone: the matrix-free stage is neither built nor sliced off
    assert parts.prep.name_out() == preps["dense"].name_out() == ["v_free", "G", "g", "w"]
    assert preps["matrix_free"].name_out() == ["v_free", "G", "g", "w", "wd"]


def test_the_step_template_asks_the_operator_for_its_c():
    """Issue 35 point 4: the route is a named Delassus operator whose C fragment the template includes
    (templates/delassus_<route>.c.j2), not a flag the template tests."""
    text = (TEMPLATE_DIR / "contact_step.c.j2").read_text()
    assert "matrix_free" not in text and "operator.route" in text
    for route in OPERATORS:
        assert (TEMPLATE_DIR / f"delassus_{route}.c.j2").is_file()
        assert (TEMPLATE_DIR / f"delassus_{route}_alone.c.j2").is_file()


def test_unknown_linear_solve_is_refused(tmp_path, problem):
    with pytest.raises(InputError, match="unknown linear_solve 'qr'"):
        contact_step("go1", problem.specs, out_dir=tmp_path, linear_solve="qr")
