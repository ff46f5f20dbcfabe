"""solver.py: the NumPy reference solve of MuJoCo's constraint problem equals MuJoCo's efc_force and
qacc (Newton run to 1e-15) on random states over every row type and both cones; it says when it
has not converged."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model.constraints import contacts_from_data
from casadi_delassus.mujoco_model.forward import ForwardModel
from casadi_delassus.mujoco_model.model import MujocoModel
from casadi_delassus.mujoco_model.solver import Problem, _line_search, evaluate, solve

from .common import load, mujoco, random_state, relative


def gradient(problem, qacc):
    """max |M (a − a₀) − Jᵀ f(a)|: how far qacc is from the problem's minimizer."""
    force = evaluate(problem, qacc)[1]
    return np.abs(problem.M @ (qacc - problem.qacc_smooth) - problem.J.T @ force).max()


def compare(name, cone, states, seed=0, height=(0.0, 0.4)):
    """(worst relative efc_force and qacc errors, the statuses, rows seen).  Where the forces differ
    by more than 1e-9, MuJoCo's Newton stopped short (its qacc's gradient at least 100 times ours:
    soft rows as stiff as Go2's impratio 100 ones turn its last qacc digits into force digits) and
    the difference counts as 1e-9."""
    m = load(name, cone)
    fm = ForwardModel(MujocoModel(m))
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    worst, statuses, rows = [0.0, 0.0], set(), 0
    for _ in range(states):
        random_state(m, d, rng, height)
        contacts = contacts_from_data(m, d)
        f = fm.forward(d.qpos, d.qvel, d.ctrl, d.qfrc_applied, contacts)
        statuses.add(f.status)
        force = relative(f.efc_force, d.efc_force)
        if force > 1e-9:
            problem = Problem.of(f.M, f.qacc_smooth, f.efc, [c.friction for c in contacts])
            assert gradient(problem, d.qacc) > 100 * gradient(problem, f.qacc) and force < 1e-7, force
            force = 1e-9
        worst = [max(worst[0], force), max(worst[1], relative(f.qacc, d.qacc))]
        rows += d.nefc
    return worst, statuses, rows


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_forces_and_accelerations_equal_mujoco(cone):
    worst, statuses, rows = compare("mjcf_rig", cone, 12, height=(0.0, 0.15))
    assert statuses == {"converged"} and rows > 200 and max(worst) < 1e-9, worst


def test_equality_rig_equals_mujoco():
    worst, statuses, _ = compare("mjcf_equality", None, 8)
    assert statuses == {"converged"} and max(worst) < 1e-9, worst


def friction_loss_problem():
    """One dof with friction loss 0.04 pushed by 0.05: the answer is on the friction's boundary."""
    efc = {"J": np.array([[1.0]]), "aref": np.zeros(1), "R": np.array([1e-4]), "type": np.array([1]),
           "frictionloss": np.array([0.04]), "id": np.array([0])}
    return Problem.of(np.eye(1), np.array([0.05]), efc)


def test_the_line_search_finds_a_minimum_short_of_the_full_step():
    """½ a² + ½ (a − 1)² from a = 0 along d = 1 is least at α = ½.  The first bracket once took the
    slope at a scaled by the step instead of at a + step: no α < 1 was ever tried, and the rig's
    friction loss rows stalled the solve (the gradient stuck at 2 × frictionloss, max iterations)."""
    efc = {"J": np.array([[1.0]]), "aref": np.ones(1), "R": np.ones(1), "type": np.array([0]),
           "frictionloss": np.zeros(1), "id": np.array([0])}
    assert abs(_line_search(Problem.of(np.eye(1), np.zeros(1), efc), np.zeros(1), np.ones(1)) - 0.5) < 1e-15


def test_a_friction_loss_answer_is_exact():
    sol = solve(friction_loss_problem())
    assert sol.status == "converged" and abs(sol.force[0] + 0.04) < 1e-15 and abs(sol.qacc[0] - 0.01) < 1e-14


def test_a_solve_that_stops_early_says_so():
    sol = solve(friction_loss_problem(), max_iter=1)
    assert sol.status == "max iterations"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ant", "go2", "g1", "h1", "humanoid", "hopper"])
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_the_issue_robots_equal_mujoco(name, cone):
    worst, statuses, _ = compare(name, cone, 20)
    assert statuses == {"converged"} and max(worst) <= 1e-9, worst
