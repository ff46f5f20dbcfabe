"""The two silently wrong models of issue 11.

Bolt (example-robot-data): its feet are zero-mass links with a rotational inertia, welded to
the shins; dropping them put every Delassus algorithm 1.8e-3 off Pinocchio while `check`
passed (the reference read the same wrong model).  Here Pinocchio, reading the URDF itself,
is the oracle.

PV-OSIM-fast's Λ through the matrix inversion lemma needs every branch block of L_b^A
invertible: a Go1 with 3D points on its calves (on the knee axes) and a biped with 3-DoF legs
under 6D soles (Bolt) have singular blocks although Λ⁻¹ is well conditioned; Λ was NaN or off
by 1.57 and 244.  The algorithm now factors such a tree whole (no lemma there)."""
import numpy as np
import pytest

from casadi_delassus.delassus import pv_osim_fast
from casadi_delassus.registry import delassus_algorithms
from casadi_delassus.sweeps.articulated import articulated_inertias
from casadi_delassus.sweeps.constraint_space import rows_to_bases
from casadi_delassus.symbolic.frames import slid_transforms
from casadi_delassus.symbolic.probe import SAMPLES, SINGULAR_BLOCK, Probe
from casadi_delassus.verify import reference as ref
from casadi_delassus.verify.check import DEFAULT_TOL, allowed_error
from casadi_delassus.codegen.trace import choose_cheapest, trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.verify.pinocchio_oracle import frame_constraint_models

from conftest import model_for

pin = pytest.importorskip("pinocchio")

BOLT = "erd:bolt_description/robots/bolt.urdf"
BOLT_FEET = {"3d": ["FL_FOOT:3d", "FR_FOOT:3d"], "6d": ["FL_FOOT:6d", "FR_FOOT:6d"]}
GO1_CALVES = [f"{leg}_calf:3d" for leg in ("FL", "FR", "RL", "RR")]
N_Q = 20


def rel(a, b):
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


@pytest.mark.parametrize("feet", list(BOLT_FEET))
def test_bolt_every_delassus_algorithm_equals_pinocchio(feet):
    robot = model_for(BOLT)
    specs = BOLT_FEET[feet]
    cs = ConstraintSet.parse(robot, specs)
    model = pin.buildModelFromUrdf(robot.source, pin.JointModelFreeFlyer())
    data, cms = model.createData(), frame_constraint_models(model, specs)
    cds = [cm.createData() for cm in cms]
    rng = np.random.default_rng(7)
    qs = [robot.random_q(rng) for _ in range(N_Q)]
    expected = [pin.computeDelassusMatrix(model, data, q, cms, cds) for q in qs]
    worst, worst_osim = {}, {}       # Λ: error / allowed error at that sample's κ (check's rule)
    for a in delassus_algorithms():
        f, _, _ = trace(robot, cs, a, osim=True)
        for q, D in zip(qs, expected):
            out = f(q=q)
            worst[a] = max(worst.get(a, 0.0), rel(out["delassus"], D))
            ratio = rel(out["osim"], np.linalg.inv(D)) / allowed_error(DEFAULT_TOL, np.linalg.cond(D))
            worst_osim[a] = max(worst_osim.get(a, 0.0), ratio)
    print(f"\nbolt {feet} Λ⁻¹ vs Pinocchio: " + ", ".join(f"{a} {e:.1e}" for a, e in worst.items()))
    print(f"bolt {feet} Λ error / allowed: " + ", ".join(f"{a} {e:.2f}" for a, e in worst_osim.items()))
    assert max(worst.values()) <= 1e-9
    assert max(worst_osim.values()) <= 1.0      # cond(Λ⁻¹) reaches 1e6 with 6D feet


def case(name):
    if name == "go1 calves 3d":
        robot = model_for("go1")
        return robot, ConstraintSet.parse(robot, GO1_CALVES)
    robot = model_for(BOLT)
    return robot, ConstraintSet.parse(robot, BOLT_FEET["6d"])


def _solve_ldl(P, B):
    L = np.tril(P, -1) + np.eye(len(P))
    return np.linalg.solve(L.T, np.linalg.solve(L, B) / np.diag(P)[:, None])


@pytest.mark.parametrize("name", ["go1 calves 3d", "bolt 6d soles"])
def test_pv_osim_fast_osim_on_singular_branches(name):
    """Λ assembled and Λ applied through the factors both equal the reference's inverse."""
    robot, cs = case(name)
    f, _, _ = trace(robot, cs, "pv_osim_fast")
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(N_Q):
        q = robot.random_q(rng)
        out = {k: np.array(v) for k, v in f(q=q).items()}
        D = ref.delassus(robot, cs, q)
        Lam = np.linalg.inv(D)
        Y = _solve_ldl(out["Lb_ldl"], np.eye(cs.m))
        applied = Y - _solve_ldl(out["Lb_ldl"], out["K_b"] @ _solve_ldl(out["schur_ldl"], out["K_b"].T @ Y))
        err = max(rel(out["osim"], Lam), rel(applied, Lam))
        worst = max(worst, err / allowed_error(DEFAULT_TOL, np.linalg.cond(D)))
    print(f"\npv_osim_fast {name}: Λ max error / allowed {worst:.2f}")
    assert worst <= 1.0


@pytest.mark.parametrize("name, singular", [("go1 calves 3d", True), ("bolt 6d soles", True),
                                            ("go1 feet 3d", False)])
def test_pv_osim_fast_finds_singular_branch_blocks(name, singular):
    """The numeric test at trace time: λmin/λmax of the worst branch block is ~0 on the
    singular structures and far above the threshold on Go1's feet."""
    if name == "go1 feet 3d":
        robot = model_for("go1")
        cs = ConstraintSet.parse(robot, robot.scenarios["4F3"])
    else:
        robot, cs = case(name)
    import casadi as ca
    q = ca.SX.sym("q", robot.nq)
    T = slid_transforms(robot, cs, q)
    Lb, stack, via = rows_to_bases(robot, cs, T, articulated_inertias(robot, T), cs.K_body())
    probe = Probe(robot, q, cs.K_body(), SAMPLES)
    ratio = pv_osim_fast.branch_conditioning(probe, Lb, {0: pv_osim_fast._branches(stack[0][0], via[0])})[0]
    assert (ratio <= SINGULAR_BLOCK) == singular
    assert ratio < 1e-14 if singular else ratio > 1e-6


@pytest.mark.parametrize("name", ["go1 calves 3d", "bolt 6d soles"])
@pytest.mark.parametrize("osim", [False, True])
def test_auto_never_picks_a_wrong_algorithm(name, osim):
    robot, cs = case(name)
    chosen, counts, _ = choose_cheapest(robot, cs, osim=osim)
    f, _, _ = trace(robot, cs, chosen, osim=osim)
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = robot.random_q(rng)
        out, D = f(q=q), ref.delassus(robot, cs, q)
        assert rel(out["delassus"], D) <= 1e-9
        if osim:
            assert rel(out["osim"], np.linalg.inv(D)) <= allowed_error(DEFAULT_TOL, np.linalg.cond(D))
