"""mujoco_model/soft_admm.py, the NumPy twin of the compiled MuJoCo step's ADMM (mujoco_step.c.j2): on problems
built from MuJoCo's own Jacobians and mass matrix, it equals the compiled step (forces, iterations, status) over
random states of gymnasium's ant and Go2 on four feet, both cones, to a tolerance scaled by the problem's
conditioning; both equal MuJoCo's efc_force and qacc where tests/mujoco/test_mujoco_step.py compares the step; a solve
that stops short says so."""
import dataclasses

import numpy as np
import pytest

from casadi_delassus.mujoco_model import soft_admm as twin
from casadi_delassus import mujoco_contact_step
from casadi_delassus.mujoco_model.soft_step import mujoco_contacts, soft_parameters
from casadi_delassus.contact.result import SOFT_DEFAULTS, SOFT_OPTIONS
from casadi_delassus.errors import ModelError
from casadi_delassus.model.mjcf import body_name
from casadi_delassus.verify.mujoco_contact_scenes import scene, scene_path, state

from conftest import TEST_CFLAGS, c_layout, rounding_tol

mujoco = pytest.importorskip("mujoco")
try:
    scene_path("go2"), scene_path("ant")
except ModelError:
    pytest.skip("robosuite-models (Go2's MJCF) or gymnasium (the ant) is not installed", allow_module_level=True)

ROBOTS = ("ant", "go2")
KINDS = ("standing", "sliding", "moved")
SEEDS = range(6)


def relative(a, b):
    """max |a − b| / max |b|."""
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), np.finfo(float).tiny))


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """One compiled step per robot for its four feet (6d-world rows; the cone is a run-time input)."""
    out = tmp_path_factory.mktemp("mjsoft_twin")
    built = {}
    for robot in ROBOTS:
        m = scene(robot, "elliptic")
        built[robot] = mujoco_contact_step(m, mujoco_contacts(m, state(m, robot, "standing")).specs, out_dir=out,
                                           cflags=TEST_CFLAGS)
    return built


def mujoco_problem(m, d, step, cone):
    """(the twin's SoftProblem, MuJoCo's contacts, M⁻¹ Jᵀ of the world rows) at ``d`` for ``step``'s contacts, G, J v
    and J a₀ from MuJoCo's mj_jac, mass matrix and qacc_smooth (none of the compiled step's SX)."""
    c = mujoco_contacts(m, d, fixed_points=3 in step.blocks)
    body = {body_name(m, b): b for b in range(m.nbody)}         # ant's feet are unnamed: body4, …
    rows = []
    for spec, offset, k in zip(c.specs, c.offsets, step.blocks):
        b = body[spec.split(":")[0]]
        jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        mujoco.mj_jac(m, d, jp, jr, d.xpos[b] + (offset if k == 3 else 0.0), b)
        rows += [jp] if k == 3 else [jp, jr]
    J = np.vstack(rows)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    MiJt = np.linalg.solve(M, J.T)
    pyramidal = cone == "pyramidal"
    p = twin.soft_problem(J @ MiJt, J @ d.qvel, J @ d.qacc_smooth, c.frames, c.friction, c.dims, c.offsets, step.blocks,
                          *soft_parameters(m, c, pyramidal), pyramidal=pyramidal)
    return p, c, MiJt


def cases(robot, step, cone):
    """(model, data) of the random states of ``robot`` whose contacts are the four feet ``step`` was built for."""
    m = scene(robot, cone)
    for kind in KINDS:
        for seed in SEEDS:
            d = state(m, robot, kind, seed)
            if d.ncon == 4 and mujoco_contacts(m, d).specs == step.contacts.specs:
                yield m, d


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
@pytest.mark.parametrize("robot", ROBOTS)
def test_the_twin_equals_the_compiled_step(steps, robot, cone):
    """Forces, impulses on the world rows, iterations and status over random states, standing, sliding and moved."""
    step, n = steps[robot], 0
    for m, d in cases(robot, step, cone):
        p, c, MiJt = mujoco_problem(m, d, step, cone)
        r, t = step.solve(m, d), twin.solve(p)
        tol = rounding_tol(np.linalg.cond(p.H))      # 0.69 of ε κ(H) at most measured, 50 to 6,419 iterations
        assert (t.status, t.iterations) == (r.status, r.iterations) == ("converged", t.iterations)
        assert relative(t.force, r.force) <= tol
        assert relative(d.qacc_smooth + MiJt @ t.lam, r.qacc) <= tol
        n += 1
    assert n >= len(KINDS) * len(SEEDS) // 2, f"only {n} states kept the four feet"


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
@pytest.mark.parametrize("kind", KINDS)
def test_both_equal_mujoco(steps, kind, cone):
    """Where tests/mujoco/test_mujoco_step.py compares the step with MuJoCo (Go2, seed 0): the twin too."""
    m = scene("go2", cone)
    d = state(m, "go2", kind)
    p, _, MiJt = mujoco_problem(m, d, steps["go2"], cone)
    t = twin.solve(p)
    assert t.status == "converged"
    assert relative(t.force, d.efc_force) <= 1e-6
    assert relative(d.qacc_smooth + MiJt @ t.lam, d.qacc) <= 1e-6


@pytest.mark.parametrize("max_iter", [0, 1, 3, 20])
@pytest.mark.parametrize("warm", [False, True])
def test_a_short_solve_says_so_alike(steps, max_iter, warm):
    """Stopped after max_iter iterations (a warm start from MuJoCo's answer, off by 10%, or none): both say "max
    iterations" after the same iterations, with the same forces, residuals NaN when none ran."""
    m = scene("go2", "elliptic")
    d = state(m, "go2", "sliding")
    step = steps["go2"]
    p, _, _ = mujoco_problem(m, d, step, "elliptic")
    force_warm = 1.1 * d.efc_force if warm else None
    r = step.solve(m, d, max_iter=max_iter, force_warm=force_warm)
    t = twin.solve(p, force_warm, dataclasses.replace(SOFT_DEFAULTS, max_iter=max_iter))
    assert (t.status, t.iterations) == (r.status, r.iterations) == ("max iterations", max_iter)
    assert np.isnan(t.residuals).all() == np.isnan(r.residuals).all() == (max_iter == 0)
    assert relative(t.force, r.force) <= rounding_tol(np.linalg.cond(p.H))


@pytest.mark.parametrize("scale", [1e160, 1e300])
def test_an_overflow_is_not_finite_alike(steps, scale):
    """A warm start that overflows (tests/mujoco/test_mujoco_step.py, issue 31 point 7): both "not finite", or both
    converged to the same forces."""
    m = scene("go2", "elliptic")
    d = state(m, "go2", "standing")
    p, _, _ = mujoco_problem(m, d, steps["go2"], "elliptic")
    warm = np.full(d.nefc, scale)
    r, t = steps["go2"].solve(m, d, force_warm=warm), twin.solve(p, warm)
    assert t.status == r.status
    if t.status == "converged":
        assert relative(t.force, r.force) <= rounding_tol(np.linalg.cond(p.H))


def test_the_generated_enum_is_the_python_layout(steps):
    """The soft step's opts[] (mujoco_step.c.j2's enum) is result.py's SOFT_OPTIONS (tests/contact/test_result.py)."""
    names, unread = c_layout(steps["ant"].so.with_suffix(".c").read_text())
    assert names == list(SOFT_OPTIONS) and not unread
