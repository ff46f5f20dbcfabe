"""The matrix-free operators (delassus_apply, damped_inverse_apply) against the NumPy oracle
(the traced SX Function evaluated numerically) on the matrix-free paper's contact scenarios and
on link-to-link and joint rows, against Pinocchio's Cholesky Delassus expression and joint
friction rows; one compiled case; the linear growth of their operation counts."""
import numpy as np
import pytest

from casadi_delassus import api
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import load_robot
from casadi_delassus.opcount import count_ops
from casadi_delassus.verify import pinocchio_oracle as oracle
from casadi_delassus.verify import reference
from casadi_delassus.verify.check import ORACLES, check_outputs, relative_error
from conftest import LOOP_CASES, case, model_for

try:
    import pinocchio as pin
except ImportError:
    pin = None
needs_pinocchio = pytest.mark.skipif(pin is None, reason="pinocchio is not installed")

N_SAMPLES = 20
TOL = 1e-9
ALGOS = ("delassus_apply", "damped_inverse_apply")
CONTACT_CASES = ["go2-4F3", "g1-8F3", "talos-2F", "swimmer5", "boxes3"]


def _random_inputs(robot, cs, rng):
    return {"q": robot.random_q(rng), "K": {}, "lam": rng.normal(size=cs.m), "R": rng.uniform(0.1, 10.0, cs.m)}


def _worst(robot, cs, algo, seed=0):
    """Max relative error against the NumPy oracle over N_SAMPLES random inputs."""
    f, _, _ = trace(robot, cs, algo)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(N_SAMPLES):
        x = _random_inputs(robot, cs, rng)
        worst = max(worst, relative_error(f(**{k: x[k] for k in f.name_in()})[algo], ORACLES[algo](robot, cs, x)))
    return worst


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("name", CONTACT_CASES + LOOP_CASES)
def test_matches_reference(name, algo):
    err = _worst(*case(name), algo)
    print(f"{name} {algo}: max relative error {err:.2e}")
    assert err <= TOL


def test_damped_inverse_inverts_regularized_delassus():
    """Λ_R (R⁻¹ + Λ⁻¹) a = a through both operators, where Λ⁻¹ is rank-deficient (g1, 24 rows
    on 12 foot DoFs)."""
    robot, cs = case("g1-8F3")
    fa = trace(robot, cs, "delassus_apply")[0]
    fd = trace(robot, cs, "damped_inverse_apply")[0]
    rng = np.random.default_rng(3)
    q, a, R = robot.random_q(rng), rng.normal(size=cs.m), rng.uniform(0.5, 2.0, cs.m)
    lam = np.asarray(fd(q=q, R=R, lam=a)["damped_inverse_apply"]).ravel()
    back = lam / R + np.asarray(fa(q=q, lam=lam)["delassus_apply"]).ravel()
    assert np.allclose(back, a, rtol=1e-9, atol=1e-9)


def test_compiled_damped_inverse_with_joint_rows(out_dir):
    robot, cs = case("tilted-joint-rows")
    f = api.generate(robot, cs, "damped_inverse_apply", out_dir=out_dir)
    errs = check_outputs(f, robot, f.constraints, samples=N_SAMPLES)
    assert set(errs) == {"damped_inverse_apply"} and errs["damped_inverse_apply"] <= TOL


def test_operators_grow_linearly():
    """Matrix-free paper Fig. 2: instructions grow linearly with the swimmer's links
    (the per-link increment is constant)."""
    counts = {a: [] for a in ALGOS}
    for n in (8, 16, 32):
        robot = load_robot(f"swimmer:n={n}")
        cs = ConstraintSet.parse(robot, robot.scenarios["default"])
        for a in ALGOS:
            counts[a].append(count_ops(trace(robot, cs, a)[0])["instructions"])
    for a, c in counts.items():
        slope = np.polyfit(np.log([8, 16, 32]), np.log(c), 1)[0]
        assert slope <= 1.1, (a, c)
        assert abs((c[2] - c[1]) / 16 - (c[1] - c[0]) / 8) <= 2, (a, c)


# -- Pinocchio ---------------------------------------------------------------------------------
@needs_pinocchio
@pytest.mark.parametrize("name", ["cassie-loops", "cassie-loops+2F", "talos-hands-welded", "go2-foot-to-foot"])
def test_operators_match_pinocchio_cholesky_expression(name):
    """delassus_apply = D λ (D @ λ) and damped_inverse_apply = (D + diag(1/R))⁻¹ a (.solve with
    Pinocchio's damping μ = 1/R: our R is the matrix-free paper's stiffness)."""
    robot, cs = case(name)
    model = oracle.model_for(robot)        # Cassie: built from our tree (Pinocchio here reads no SDF)
    cms, data = oracle.constraint_models(model, robot, cs), model.createData()
    fa = trace(robot, cs, "delassus_apply")[0]
    fd = trace(robot, cs, "damped_inverse_apply")[0]
    rng = np.random.default_rng(2)
    worst = {"apply": 0.0, "damped": 0.0}
    for _ in range(N_SAMPLES):
        x = _random_inputs(robot, cs, rng)
        D = oracle.delassus_expression(model, data, cms, x["q"], 1e-14)[0]
        worst["apply"] = max(worst["apply"], relative_error(fa(q=x["q"], lam=x["lam"])["delassus_apply"], D @ x["lam"]))
        E = oracle.delassus_expression(model, data, cms, x["q"], 1 / x["R"])[0]         # μ = 1/R
        damped = fd(q=x["q"], R=x["R"], lam=x["lam"])["damped_inverse_apply"]
        worst["damped"] = max(worst["damped"], relative_error(damped, E.solve(x["lam"])))
    print(name, worst)
    assert max(worst.values()) <= TOL


@needs_pinocchio
def test_joint_rows_match_pinocchio_joint_friction():
    robot = model_for("go2")
    cs = ConstraintSet.parse(robot, ["JOINT:root_joint", "JOINT:FL_hip_joint", "JOINT:RR_calf_joint"])
    model = pin.buildModelFromUrdf(str(robot.source), pin.JointModelFreeFlyer())
    data = model.createData()
    friction = pin.JointFrictionConstraintModel(model, pin.StdVec_Index([1 + c.body for c in cs.constraints]))
    cms, cds = pin.StdVec_ConstraintModel(), pin.StdVec_ConstraintData()
    cms.append(friction)
    cds.append(friction.createData())
    fa = trace(robot, cs, "delassus_apply")[0]
    rng = np.random.default_rng(4)
    for _ in range(5):
        q, lam = robot.random_q(rng), rng.normal(size=cs.m)
        pin.computeJointJacobians(model, data, q)
        pin.crba(model, data, q)
        chol = pin.ConstraintCholeskyDecomposition(model, data, cms, cds)
        chol.compute(model, data, cms, cds, 0.0)
        D = chol.getDelassusOperatorCholeskyExpression().matrix()
        assert relative_error(D, reference.delassus(robot, cs, q)) <= 1e-12
        assert relative_error(fa(q=q, lam=lam)["delassus_apply"], D @ lam) <= TOL
