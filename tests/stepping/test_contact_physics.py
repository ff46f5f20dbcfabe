"""Physics of the compiled contact step: a box on a tilted plane sticks or slides as Coulomb
says, and go1 under its balancing torque stays where it stands over 1,000 steps."""
import numpy as np
import pytest

from casadi_delassus import contact_step
from casadi_delassus.model import load_robot
from casadi_delassus.model.integrate import integrate

from conftest import TEST_CFLAGS

G0 = 9.81
BOX = """<robot name="box"><link name="box"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
<inertia ixx="0.0083" iyy="0.0083" izz="0.0133" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""
CORNERS = [f"box:3d-world@{x},{y},-0.05" for x in (0.1, -0.1) for y in (0.1, -0.1)]
DT = 1e-3


def box_on_slope(theta, solver, out_dir):
    """The box on a plane tilted by θ about y: gravity turned by θ in the plane's frame (z up
    the plane's normal, x down the slope)."""
    robot = load_robot(BOX)
    robot.gravity = G0 * np.array([np.sin(theta), 0.0, -np.cos(theta)])
    return robot, contact_step(robot, CORNERS, solver=solver, out_dir=out_dir, cflags=TEST_CFLAGS, delassus="naive")


@pytest.fixture(scope="module")
def slopes(tmp_path_factory):
    out = tmp_path_factory.mktemp("box")
    return {(theta, solver): box_on_slope(theta, solver, out) for theta in (0.3, 0.6) for solver in ("admm", "pgs")}


def rest_state():
    q = np.array([0.0, 0.0, 0.05, 0.0, 0.0, 0.0, 1.0])
    return q, np.zeros(6), np.zeros(6)


@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("mu", [0.2, 0.5, 0.9])
@pytest.mark.parametrize("theta", [0.3, 0.6])
def test_box_sticks_or_slides_as_coulomb_says(slopes, theta, mu, solver):
    robot, s = slopes[theta, solver]
    q, v, tau = rest_state()
    for _ in range(3):                       # three steps from rest, integrating q
        r = s(q, v, tau, dt=DT, mu=mu, tol=1e-13, max_iter=5000)
        assert r.converged
        a = (r.v_next - v) / DT
        expected = max(G0 * (np.sin(theta) - mu * np.cos(theta)), 0.0)
        assert abs(a[0] - expected) * DT <= 1e-9               # down the slope
        assert np.max(np.abs(a[1:])) * DT <= 1e-9              # no lift, no turn
        q, v = integrate(robot, q, DT * r.v_next), r.v_next


def test_go1_balanced_stays_put_over_1000_steps(tmp_path):
    pytest.importorskip("pinocchio")
    from casadi_delassus.verify import contact_problems as cp
    p = cp.build("go1_stand")
    robot = load_robot("go1")
    s = contact_step(robot, p.specs, out_dir=tmp_path, cflags=TEST_CFLAGS, delassus="pv_osim")
    q, v, lam = p.q.copy(), p.v.copy(), None
    for _ in range(1000):
        r = s(q, v, p.tau, dt=DT, lam0=lam, tol=1e-12)
        assert r.converged
        q, v, lam = integrate(robot, q, DT * r.v_next), r.v_next, r.lam
    assert np.max(np.abs(q[:3] - p.q[:3])) <= 1e-9
    assert np.max(np.abs(q[7:] - p.q[7:])) <= 1e-9


def test_model_names_reach_the_c_file_escaped(tmp_path):
    """A robot and link name that would close the C comment compile (the template escapes them)."""
    evil = BOX.replace('robot name="box"', 'robot name="b*/ox"').replace('link name="box"', 'link name="b*/ox"')
    s = contact_step(evil, [c.replace("box:", "b*/ox:") for c in CORNERS], out_dir=tmp_path, cflags=TEST_CFLAGS,
                     delassus="naive")
    text = s.so.with_suffix(".c").read_text()
    assert "b*/ox" not in text and "b* /ox" in text
    q, v, tau = rest_state()
    assert s(q, v, tau, dt=DT).converged
