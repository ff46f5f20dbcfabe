"""The rollout's SIMD lane groups (issue 33 point 2; codegen/contact_rollout.py, templates/contact_rollout.c.j2): each
environment of ``<name>_rollout_lanes_batch`` takes the steps of the scalar rollout (``<name>_rollout_batch`` of the
same .so): the same statuses and counts, states within 1e-12 over 1,000 steps (not bit for bit: the vectorised SX is
contracted and takes libmvec's sin/cos where the scalar code does not), whatever the threads; a bad lane count is one
line.  In single precision (issue 33 point 3): float32 throughout, within the error its build measured against the
double rollout, the lanes within twice that of the scalar single rollout; bad precision, tol and inputs one line."""
import re

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.errors import DelassusError, InputError
from casadi_delassus.runtime.contact_rollout import SINGLE_TOL_FLOOR
from casadi_delassus.simulation import simulate as sim
from casadi_delassus.simulation.simulate_batch import run_batch
from casadi_delassus.stepping.rollout import CompiledRollout
from casadi_delassus.verify.precision import CHECK_FACTOR, rollout_errors

FEET = [f"{leg}_foot@-0.0173782,0,-0.0098993" for leg in ("FL", "FR", "RL", "RR")]
DT = 1e-3
TAU_LIMIT = 60.0        # N m: the others stay below 10
N = 11          # two groups of 4 lanes and a partial one (AVX2), a group of 8 and a partial one (AVX-512)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """go1 standing under PD, its rollout built with lanes of the CPU's width, and N environments: dropped from
    0-2 cm, turning at random rates, one landing fast (its torques pass TAU_LIMIT a few steps in), the last one under
    the ground (it stops at step 0)."""
    pytest.importorskip("pinocchio")
    from casadi_delassus.verify import contact_problems
    go1, stand = cd.load_robot("go1"), contact_problems.build("go1_stand")
    scene = sim.Scene(go1, FEET)
    pd = cd.pd_controller(go1, stand.q, 60.0, 2.0, stand.tau)
    built = CompiledRollout(go1, scene.specs(stand.q), scene._positions, "auto", out_dir=tmp_path_factory.mktemp("lanes"),
                            lanes="auto")
    Q0 = np.array([sim.place(scene, stand.q, h) for h in np.linspace(0.0, 0.02, N)])
    Q0[-1, 2] -= 1.5
    V0 = np.zeros((N, go1.nv))
    V0[:, 3:6] = 0.3 * np.random.default_rng(0).normal(size=(N, 3))
    V0[5, 2] = -5.0         # its landing's torques pass TAU_LIMIT a few steps in, while its lane group goes on
    return scene, pd, built, Q0, V0


def _rollouts(scene, built, Q0, V0, steps, pd, threads=1, lanes=None):
    """The RawRollouts of ``built`` (lanes=1: its scalar entry point)."""
    return built(Q0, V0, steps, DT, pd, scene.normal, scene.height, [c.radius for c in scene.candidates], scene.mu,
                 scene.margin, TAU_LIMIT, sim.FALL_DEPTH, None, threads, sim.BAUMGARTE, lanes=lanes)


def test_lanes_equal_scalar_rollouts_over_1000_steps(setup):
    """1,000 steps (in parts, as the progress bar cuts them) under the auto solver (PGS here: the lanes' masked PGS):
    statuses, counts and stops equal (a lane that stops mid-way, one at step 0, a partial lane group), states within
    1e-12, forces within 1e-9 of their largest, and the solver's iterations within one, each lane its own."""
    scene, pd, built, Q0, V0 = setup
    assert built.lanes >= 2
    lanes, scalar = (_rollouts(scene, built, Q0, V0, 1000, pd, lanes=w) for w in (None, 1))
    assert np.array_equal(lanes.count, scalar.count) and list(scalar.count[[0, -1]]) == [1000, 1]
    assert 1 < scalar.count[5] < 100 and scalar.STATUS[scalar.count[5] - 1, 5] == sim.ROLLOUT_STATUSES.index(sim.CONTROLLER)
    assert np.array_equal(lanes.STATUS, scalar.STATUS)
    for name in ("Q", "V", "TAU", "GAPS"):
        a, b = getattr(lanes, name), getattr(scalar, name)
        assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.nanmax(np.abs(lanes.Q - scalar.Q)) <= 1e-12
    assert np.nanmax(np.abs(lanes.V - scalar.V)) <= 1e-10
    assert np.abs(lanes.FORCES - scalar.FORCES).max() <= 1e-9 * np.abs(scalar.FORCES).max()
    assert np.abs(lanes.ITS - scalar.ITS).max() <= 1
    # the PGS lanes iterate together (pgs_lanes) but each lane stops at its own count: within a lane group (the first
    # 4 environments, in one group at any width) the counts of a step differ, as the scalar rollout's do
    its = lanes.ITS[:200, :4]
    assert (its.max(axis=1) > its.min(axis=1)).any()


def test_lanes_do_not_depend_on_threads(setup):
    """The lane groups split across two threads: each environment's records bit for bit those of one thread."""
    scene, pd, built, Q0, V0 = setup
    one, two = (_rollouts(scene, built, Q0, V0, 60, pd, threads=t) for t in (1, 2))
    for a, b in zip(one.__dict__.values(), two.__dict__.values()):
        assert np.array_equal(a, b, equal_nan=True)


def test_run_batch_takes_lanes(setup):
    """run_batch(lanes=…) runs the lanes' build; lanes on the per-step loop and bad lane counts are one-line errors."""
    scene, pd, built, Q0, V0 = setup
    factory = sim.factory("compiled", "auto", out_dir=built.so.parent.parent.parent)
    b = run_batch(scene, Q0[:3], V0[:3], 0.02, DT, pd, factory, lanes="auto")
    one = _rollouts(scene, built, Q0[:3], V0[:3], 20, pd, lanes=1)
    assert np.nanmax(np.abs(b.q - one.Q)) <= 1e-12
    with pytest.raises(InputError, match="runs the C rollout only"):
        run_batch(scene, Q0[:3], V0[:3], 0.002, DT, lambda t, q, v: np.zeros_like(v), factory, lanes="auto")
    for bad in (3, 0, 32, "wide", True):
        with pytest.raises(InputError, match="lanes"):
            run_batch(scene, Q0[:3], V0[:3], 0.002, DT, pd, factory, lanes=bad)
    matrix_free = sim.factory("compiled", "auto", out_dir=built.so.parent.parent.parent, linear_solve="matrix_free")
    with pytest.raises(InputError, match="dense linear solve only"):     # each lane solves on its explicit G
        run_batch(scene, Q0[:3], V0[:3], 0.002, DT, pd, matrix_free, lanes="auto")


def test_lanes_run_admm_too(setup):
    """The lanes' solve is the step's own whichever solver: ADMM (with its ρ updates and Anderson steps) over 300
    steps, equal to the scalar entry point in statuses and counts, states within 1e-12."""
    scene, pd, built, Q0, V0 = setup
    admm = CompiledRollout(built.robot, scene.specs(Q0[0]), scene._positions, "admm", out_dir=built.so.parent.parent.parent,
                           lanes="auto")          # the solver is a run-time option: the same build as setup's
    lanes, scalar = (_rollouts(scene, admm, Q0, V0, 300, pd, lanes=w) for w in (None, 1))
    assert np.array_equal(lanes.count, scalar.count) and np.array_equal(lanes.STATUS, scalar.STATUS)
    assert (scalar.ITS > 0).any() and np.nanmax(np.abs(lanes.Q - scalar.Q)) <= 1e-12


SINGLE_TOL = 2 * SINGLE_TOL_FLOOR        # the solves' tolerance in both precisions of the single-precision tests


@pytest.fixture(scope="module")
def single(setup):
    """setup's rollout built in single precision (lanes of the CPU's width), measured at build on setup's first four
    environments (verify/precision.py ROLLOUT_ENVIRONMENTS), and a factory of it."""
    scene, pd, built, Q0, V0 = setup
    out = built.so.parent.parent.parent
    measured = sim.measured_on(scene, Q0[:4], V0[:4], DT, pd, TAU_LIMIT, sim.BAUMGARTE)
    f32 = CompiledRollout(built.robot, scene.specs(Q0[0]), scene._positions, "auto", SINGLE_TOL, out_dir=out, lanes="auto",
                          precision="single", measured_on=measured)
    f64 = CompiledRollout(built.robot, scene.specs(Q0[0]), scene._positions, "auto", SINGLE_TOL, out_dir=out, lanes="auto")
    return f32, f64


def test_single_rollout_within_its_measured_error(setup, single):
    """The build's record (1,000 steps of four environments against the double rollout, its growth by horizon); on
    four other environments the float32 rollout errs against the double one by no more than CHECK_FACTOR times the
    recorded error at the same horizon (10 steps: before any contact event, where a step's rounding and where each
    solve stops within tol set the difference; later, a stick-slip or landing taken a step apart by the two sets it),
    and by more than double's rounding (it computes in float: a float64 build errs by ~1e-15)."""
    scene, pd, built, Q0, V0 = setup
    f32, f64 = single
    p = f32.precision
    assert p["type"] == "single" and p["samples"] == 4 and p["steps"] == 1000 and p["tol"] == SINGLE_TOL
    assert set(p["growth"]) == {"1", "10", "100", "1000"} and p["growth"]["1000"] == p["max_rel_error"]
    assert f32.lanes == 2 * f64.lanes
    # float throughout: no double in its code (comments aside), any promotion a compile error, its own C names
    code = [line for line in f32.so.with_suffix(".c").read_text().splitlines()
            if not line.lstrip().startswith(("/*", "*", "//"))]
    assert "#define casadi_real float" in code and not [line for line in code if re.search(r"\bdouble\b", line)]
    assert "-Werror=double-promotion" in f32.manifest["cflags"] and f32.manifest["function"].endswith("_SINGLE")
    fresh = slice(6, 10)            # dropped 1.2-1.8 cm, turning: not among the four measured
    a, b = (_rollouts(scene, r, Q0[fresh], V0[fresh], 10, pd, lanes=1) for r in (f64, f32))
    assert b.Q.dtype == b.V.dtype == b.FORCES.dtype == np.float32 and a.Q.dtype == np.float64
    errors = rollout_errors(a, b)
    assert 1e-9 < errors.max() <= CHECK_FACTOR * p["growth"]["10"]


def test_single_lanes_within_twice_the_error_of_scalar(setup, single):
    """The float32 lane groups (twice double's lanes) against the float32 scalar rollout: the same counts and stops
    over 300 steps; over the first 10 steps within 2 × CHECK_FACTOR × the recorded error at 10 steps (each within its
    bound of the double rollout: the triangle inequality; they differ as double's lanes do, by contractions and libmvec,
    but float32's rounding is what those change)."""
    scene, pd, built, Q0, V0 = setup
    f32, _ = single
    lanes, scalar = (_rollouts(scene, f32, Q0, V0, 300, pd, lanes=w) for w in (None, 1))
    assert np.array_equal(lanes.count, scalar.count)
    last = np.maximum(scalar.count - 1, 0)
    assert np.array_equal(lanes.STATUS[last, range(N)], scalar.STATUS[last, range(N)])
    short = [_rollouts(scene, f32, Q0[:-1], V0[:-1], 10, pd, lanes=w) for w in (None, 1)]
    assert rollout_errors(short[1], short[0]).max() <= 2 * CHECK_FACTOR * f32.precision["growth"]["10"]


def test_single_refusals_are_one_line(setup, single):
    """A tol below float32's floor, a max_iter float32 does not count, a precision that is not one, single precision on
    the per-step loop, a state beyond float32's range, a single build without its measurement: one line each."""
    scene, pd, built, Q0, V0 = setup
    out = built.so.parent.parent.parent
    factory = sim.factory("compiled", "auto", SINGLE_TOL, out_dir=out, precision="single")
    with pytest.raises(InputError, match=r"below what a float32 solve reaches \(1.19209e-07"):
        run_batch(scene, Q0[:2], V0[:2], 0.002, DT, pd, sim.factory("compiled", "auto", 1e-8, out_dir=out,
                                                                     precision="single"))
    with pytest.raises(InputError, match="above what a float32 count holds"):
        run_batch(scene, Q0[:2], V0[:2], 0.002, DT, pd, sim.factory("compiled", "auto", SINGLE_TOL, 2 ** 25,
                                                                     out_dir=out, precision="single"))
    with pytest.raises(DelassusError, match="precision 'half'"):
        run_batch(scene, Q0[:2], V0[:2], 0.002, DT, pd, sim.factory("compiled", "auto", out_dir=out, precision="half"))
    with pytest.raises(InputError, match="runs the C rollout only"):
        run_batch(scene, Q0[:2], V0[:2], 0.002, DT, lambda t, q, v: np.zeros_like(v), factory)
    with pytest.raises(InputError, match="measures its error against double"):
        CompiledRollout(built.robot, scene.specs(Q0[0]), scene._positions, out_dir=out, precision="single")
    far = V0[:2].copy()
    far[0, 6] = 1e39
    with pytest.raises(InputError, match="V0 holds values beyond float32's range"):
        _rollouts(scene, single[0], Q0[:2], far, 2, pd)
    for exc in (InputError, DelassusError):
        try:
            run_batch(scene, Q0[:2], V0[:2], 0.002, DT, pd, sim.factory("compiled", "auto", 1e-9, out_dir=out,
                                                                         precision="single"))
        except exc as e:
            assert "\n" not in str(e)
