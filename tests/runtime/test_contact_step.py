"""The compiled contact step's active-set mask (runtime/contact_step.py ``active``, the C keep_active): on go1's four
feet, the step of every candidate masked by A equals the step built for A alone (to a tolerance scaled by cond(G[A, A]))
and the NumPy reference step with the same mask (simulation/reference_step.py) on random states, on both linear-solve
routes and both solvers, the other contacts' λ and σ exactly 0; a batch of masks equals single calls bit for bit,
solver "auto" picking per active set (a box's corners: ADMM from three on one body, PGS below); bad masks refused in
one line."""
import numpy as np
import pytest

from casadi_delassus import contact_step, load_robot
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import InputError
from casadi_delassus.simulation.reference_step import reference_steps
from conftest import BOX, BOX_CORNERS, TEST_CFLAGS

FEET = [f"{leg}_foot@-0.0173782,0,-0.0098993" for leg in ("FL", "FR", "RL", "RR")]
MASKS = ((True, False, True, True), (False, True, False, False), (True, True, False, False))
TOL = 1e-12          # the solves' tolerance
RELATIVE = {"dense": 1e-14, "matrix_free": 1e-8}      # |Δλ| / (cond(G[A, A]) max|λ|) allowed, per route


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return tmp_path_factory.mktemp("masked")


def _step(specs, out, solver="admm", linear_solve="dense", robot="go1"):
    """A TEST_CFLAGS build of the step (pv_osim's G: the same algorithm for every contact set)."""
    return contact_step(robot, specs, solver=solver, out_dir=out, cflags=TEST_CFLAGS, delassus="pv_osim",
                        linear_solve=linear_solve, quiet=True)


@pytest.fixture(scope="module")
def full(out):
    """The step of every foot, on each route."""
    return {r: _step(FEET, out, linear_solve=r) for r in ("dense", "matrix_free")}


@pytest.fixture(scope="module")
def alone(out):
    """The step built for each active set alone on each route (what simulation/ built per set before issue 35)."""
    return {(r, m): _step([f for f, a in zip(FEET, m) if a], out, linear_solve=r) for m in MASKS
            for r in ("dense", "matrix_free")}


def _states(stand, n, seed):
    """n random states near go1's stance: joints perturbed, random velocities and torques."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        q = stand.q.copy()
        q[7:] += 0.05 * rng.normal(size=len(q) - 7)
        yield q, 0.3 * rng.normal(size=len(stand.v)), stand.tau + rng.normal(size=len(stand.tau))


def _cond(stand, q, mask):
    """cond(G[A, A]) at q, by the NumPy reference (verify/reference.py)."""
    from casadi_delassus.verify import reference
    robot = load_robot("go1")
    cs = ConstraintSet.parse(robot, [f.replace("@", ":3d-world@") for f, a in zip(FEET, mask) if a])
    J = reference.constraint_jacobian(robot, cs, q)
    return np.linalg.cond(J @ np.linalg.solve(reference.mass_matrix(robot, q), J.T))


@pytest.mark.parametrize("solver", ["admm", "pgs"])
@pytest.mark.parametrize("route", ["dense", "matrix_free"])
def test_the_masked_step_is_the_step_of_the_active_set_alone(full, alone, stand, route, solver):
    """λ on A equals the A-only step's on the same route (same status; matrix-free solves to 1e-12 may stop at
    max_iter on both sides, the route's rounding) to RELATIVE[route] cond(G[A, A]) max|λ|, v⁺ likewise; every other
    contact's λ and σ exactly 0."""
    worst = 0.0
    for q, v, tau in _states(stand, 4, 1):
        for m in MASKS:
            A = np.array(m)
            r = _call(full[route], solver, q, v, tau, A)
            a = _call(alone[route, m], solver, q, v, tau, None)
            lam, sigma = r.lam.reshape(4, 3), r.sigma.reshape(4, 3)
            assert r.status == a.status and (route == "matrix_free" or r.status == "converged")
            assert np.all(lam[~A] == 0) and np.all(sigma[~A] == 0)
            scale = _cond(stand, q, m) * max(np.abs(a.lam).max(), 1e-12)
            worst = max(worst, np.abs(lam[A].ravel() - a.lam).max() / scale)
            bound = RELATIVE[route] * scale
            assert np.abs(lam[A].ravel() - a.lam).max() <= bound
            assert np.abs(r.v_next - a.v_next).max() <= 1e3 * bound + 1e-13 * np.abs(a.v_next).max()
    print(f"{route} {solver}: largest |Δλ| / (cond max|λ|) {worst:.1e}")


def _call(step, solver, q, v, tau, active):
    """The step solved by ``solver`` (the solver is a run-time option: set on the loaded step)."""
    step.solver = solver
    return step(q, v, tau, tol=TOL, active=active)


@pytest.mark.parametrize("solver", ["admm", "pgs"])
def test_the_masked_step_equals_the_numpy_reference_with_the_same_mask(full, stand, solver):
    """The NumPy reference step (simulation/reference_step.py: the solve on G[A, A]) with the same mask: λ to
    1e-10 cond(G[A, A]) max|λ|, the inactive λ exactly 0 on both sides."""
    ref = reference_steps(solver, tol=TOL)(full["dense"].robot, full["dense"].contacts.specs, 0.8, np.eye(3))
    for q, v, tau in _states(stand, 3, 2):
        for m in MASKS:
            A = np.array(m)
            r, b = _call(full["dense"], solver, q, v, tau, A), ref(q, v, tau, 1e-3, active=A)
            assert r.status == b.status == "converged"
            assert np.all(b.lam.reshape(4, 3)[~A] == 0) and np.all(r.lam.reshape(4, 3)[~A] == 0)
            bound = 1e-10 * _cond(stand, q, m) * max(np.abs(b.lam).max(), 1e-12)
            assert np.abs(r.lam - b.lam).max() <= bound
            assert np.abs(r.v_next - b.v_next).max() <= 1e3 * bound + 1e-13 * np.abs(b.v_next).max()


def test_a_batch_of_masks_equals_single_calls(full, stand):
    """One mask per state (and one for all) through ``<name>_step_active_batch`` on two threads: each row equals its
    single call bit for bit."""
    states = list(_states(stand, 3, 3))
    Q, V, TAU = (np.array([s[i] for s in states]) for i in range(3))
    masks = np.array(MASKS)
    step = full["dense"]
    step.solver = "admm"
    b = step(Q, V, TAU, tol=TOL, active=masks, threads=2)
    one = step(Q, V, TAU, tol=TOL, active=masks[0], threads=2)
    for e in range(3):
        s = step(Q[e], V[e], TAU[e], tol=TOL, active=masks[e])
        assert np.array_equal(b.lam[e], s.lam) and np.array_equal(b.v_next[e], s.v_next)
        assert np.array_equal(one.lam[e], step(Q[e], V[e], TAU[e], tol=TOL, active=masks[0]).lam)


def test_auto_picks_the_solver_per_active_set_in_a_batch(out):
    """solver "auto" on a box's four corners (one body): ADMM where three or more are active, PGS (falling back to
    ADMM) below; a batch mixing both is split by the pick and each row equals its single call and the step that
    asks for the pick's solver."""
    box = load_robot(BOX)
    auto, admm, pgs = (_step(BOX_CORNERS, out, s, robot=box) for s in ("auto", "admm", "pgs"))
    q = box.neutral_q()
    Q, V, TAU = np.tile(q, (3, 1)), np.tile([0.1, 0.0, -0.3, 0.0, 0.2, 0.0], (3, 1)), np.zeros((3, 6))
    masks = np.array([[True, True, True, True], [True, False, False, True], [False, True, True, True]])
    b = auto(Q, V, TAU, tol=TOL, active=masks)
    for e, want in enumerate((admm, pgs, admm)):
        s = auto(Q[e], V[e], TAU[e], tol=TOL, active=masks[e])
        assert np.array_equal(b.lam[e], s.lam) and b.status[e] == s.status == "converged"
        w = want(Q[e], V[e], TAU[e], tol=TOL, active=masks[e])
        if want is admm:
            assert np.array_equal(s.lam, w.lam) and s.iterations == w.iterations
        else:       # PGS, with ADMM where it does not converge (auto's fallback)
            assert s.iterations == w.iterations or w.status != "converged"


@pytest.mark.parametrize("mask, words", [
    ([True, False, True], r"active: expected a mask of shape \(4,\)"),
    ([[True] * 4] * 2, r"active: expected a mask of shape \(4,\)"),
    ([0.5, 1, 1, 1], "active: expected booleans"),
    (["yes", "no", "yes", "no"], "active.*must hold real numbers"),
    ([True, np.nan, True, True], "active: expected booleans"),
])
def test_a_bad_mask_is_refused_in_one_line(full, stand, mask, words):
    with pytest.raises(InputError, match=words) as e:
        full["dense"](stand.q, stand.v, stand.tau, active=mask)
    assert "\n" not in str(e.value)
