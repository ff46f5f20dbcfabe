"""Link-to-link (A|B) and joint (JOINT:NAME) constraints: naive, ltl_osim, delassus_apply and
damped_inverse_apply against the NumPy oracle (traced SX evaluated numerically) on Cassie's
loops, a Talos hand-to-hand weld, a Go2 foot-to-foot point and joint rows; Pinocchio's
constraint Jacobian and Cholesky Delassus expression; the SDF reader; rejections and bad specs."""
import functools

import numpy as np
import pytest

from casadi_delassus import api
from casadi_delassus.verify import reference
from casadi_delassus.verify import pinocchio_oracle as oracle
from casadi_delassus.registry import ALGORITHMS, loop_algorithms
from casadi_delassus.verify.check import ORACLES, check_outputs, relative_error
from casadi_delassus.codegen.trace import choose_cheapest, trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ConstraintError, ModelError
from casadi_delassus.model.sdf import load_sdf
from conftest import model_for, tilted_robot

try:
    import pinocchio as pin
except ImportError:
    pin = None
needs_pinocchio = pytest.mark.skipif(pin is None, reason="pinocchio is not installed")

N_SAMPLES = 20
TOL = 1e-9
LOOP_ALGOS = ("naive", "ltl_osim", "delassus_apply", "damped_inverse_apply")
GO2_PAIR = ["FL_foot|RR_foot:3d@0.02,0,0;0,0.01,-0.02", "FR_foot:3d"]
TALOS_WELD = ["left_sole_link:6d", "right_sole_link:6d", "gripper_left_base_link|gripper_right_base_link:6d"]
CASES = {
    "cassie-loops": ("cassie", "loops"),
    "cassie-loops+2F": ("cassie", "loops+2F"),
    "talos-hands-welded": ("talos", TALOS_WELD),
    "go2-foot-to-foot": ("go2", GO2_PAIR),
    "tilted-joint-rows": ("tilted", ["JOINT:tj0", "JOINT:tj2", "JOINT:tj4", "t7|t5:6d", "t3:3d"]),
}


@functools.lru_cache(maxsize=None)
def _case(case):
    spec, constraints = CASES[case]
    robot = model_for(spec)
    specs = robot.scenarios[constraints] if isinstance(constraints, str) else constraints
    return robot, ConstraintSet.parse(robot, specs)


def _inputs(f, cs, rng, robot):
    x = {"q": robot.random_q(rng), "K": {}, "lam": rng.normal(size=cs.m), "R": rng.uniform(0.1, 10.0, cs.m)}
    return x, {k: x[k] for k in f.name_in()}


@pytest.mark.parametrize("algo", LOOP_ALGOS)
@pytest.mark.parametrize("case", CASES)
def test_matches_reference(case, algo):
    robot, cs = _case(case)
    f, _, _ = trace(robot, cs, algo)
    out = f.name_out()[0]
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(N_SAMPLES):
        x, args = _inputs(f, cs, rng, robot)
        worst = max(worst, relative_error(np.asarray(f(**args)[out]), ORACLES[out](robot, cs, x)))
    print(f"{case} {algo}: max relative error {worst:.2e}")
    assert worst <= TOL


def test_compiled_damped_inverse_with_joint_rows(out_dir):
    robot, cs = _case("tilted-joint-rows")
    f = api.generate(robot, cs, "damped_inverse_apply", out_dir=out_dir)
    errs = check_outputs(f, robot, f.constraints, samples=N_SAMPLES)
    assert set(errs) == {"damped_inverse_apply"} and errs["damped_inverse_apply"] <= TOL


# -- Pinocchio -------------------------------------------------------------------------------


def _pinocchio_case(case):
    robot, cs = _case(case)
    model = oracle.model_for(robot)        # Cassie: built from our tree (Pinocchio here reads no SDF)
    return robot, cs, model, oracle.constraint_models(model, robot, cs)


@needs_pinocchio
@pytest.mark.parametrize("case", ["go2-foot-to-foot", "talos-hands-welded"])
def test_reference_jacobian_is_pinocchios(case):
    robot, cs, model, cms = _pinocchio_case(case)
    data = model.createData()
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = robot.random_q(rng)
        _, cds = oracle.delassus_expression(model, data, cms, q, 0.0)
        J = pin.getConstraintsJacobian(model, data, cms, cds)
        assert np.abs(J - reference.constraint_jacobian(robot, cs, q)).max() <= 1e-12


@needs_pinocchio
@pytest.mark.parametrize("case", ["cassie-loops", "cassie-loops+2F", "talos-hands-welded", "go2-foot-to-foot"])
def test_operators_match_pinocchio_cholesky_expression(case):
    """delassus_apply = D λ (D @ λ) and damped_inverse_apply = (D + diag(1/R))⁻¹ a (.solve with
    Pinocchio's damping μ = 1/R: our R is the matrix-free paper's stiffness)."""
    robot, cs, model, cms = _pinocchio_case(case)
    data = model.createData()
    fa = trace(robot, cs, "delassus_apply")[0]
    fd = trace(robot, cs, "damped_inverse_apply")[0]
    rng = np.random.default_rng(2)
    worst = {"apply": 0.0, "damped": 0.0}
    for _ in range(N_SAMPLES):
        q, lam, R = robot.random_q(rng), rng.normal(size=cs.m), rng.uniform(0.1, 10.0, cs.m)
        D = oracle.delassus_expression(model, data, cms, q, 1e-14)[0]
        worst["apply"] = max(worst["apply"], relative_error(fa(q=q, lam=lam)["delassus_apply"], D @ lam))
        E = oracle.delassus_expression(model, data, cms, q, 1 / R)[0]         # μ = 1/R
        damped = fd(q=q, R=R, lam=lam)["damped_inverse_apply"]
        worst["damped"] = max(worst["damped"], relative_error(damped, E.solve(lam)))
    print(case, worst)
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


# -- rejection, choice, bad specs -------------------------------------------------------------


@pytest.mark.parametrize("algo", [a for a in ALGORITHMS if a not in loop_algorithms()])
def test_other_algorithms_reject_link_to_link_and_joint_rows(algo):
    robot, cs = _case("go2-foot-to-foot")
    with pytest.raises(ConstraintError) as err:
        trace(robot, cs, algo)
    msg = str(err.value)
    assert f"algorithm {algo!r}" in msg and "FL_foot|RR_foot" in msg and "\n" not in msg
    assert all(a in msg for a in ("naive", "ltl_osim", "delassus_apply", "damped_inverse_apply", *loop_algorithms()))


def test_auto_chooses_among_the_algorithms_that_accept_them():
    robot, cs = _case("go2-foot-to-foot")
    best, counts, _ = choose_cheapest(robot, cs)
    assert set(counts) == {"naive", "ltl_osim"} and best in counts


@pytest.mark.parametrize("spec, words", [
    ("FL_fot|RR_foot:3d", "unknown link or frame of robot 'go2' 'FL_fot'; did you mean 'FL_foot'"),
    ("FL_foot|FL_foot:6d", "are on the same body"),
    ("FL_foot|FL_calf:3d", "are on the same body 'FL_calf'"),
    ("FL_foot|RR_foot:3d@1,2;3,4,5", "points must be @ax,ay,az[;bx,by,bz]"),
    ("FL_foot|RR_foot:3d@1,2,3;4,5,6;7,8,9", "points must be @ax,ay,az[;bx,by,bz]"),
    ("FL_foot|RR_foot:6d@1,2,3", "only A|B:3d takes points"),
    ("FL_foot|RR_foot:random6", "a link-to-link constraint is 3d or 6d"),
    ("FL_foot|:3d", "names two links"),
    ("JOINT:FL_hip_jiont", "unknown joint of robot 'go2' 'FL_hip_jiont'; did you mean 'FL_hip_joint'"),
])
def test_bad_specs(spec, words):
    with pytest.raises(ConstraintError) as err:
        ConstraintSet.parse(model_for("go2"), [spec])
    assert words in str(err.value) and "\n" not in str(err.value)


def test_rows_and_names():
    cs = ConstraintSet.parse(tilted_robot(), ["JOINT:tj0", "JOINT:tj3", "t7|t5:6d", "t7|t5:3d"])
    assert cs.m == 6 + 1 + 6 + 3
    assert cs.row_names[:7] == [f"tj0.{n}" for n in ("vx", "vy", "vz", "wx", "wy", "wz")] + ["tj3.v"]
    assert cs.row_names[7] == "t7|t5.vx" and cs.row_names[-1] == "t7|t5.z"


# -- the SDF reader and Cassie ----------------------------------------------------------------


@needs_pinocchio
def test_cassie_spanning_tree_and_loops():
    robot = model_for("cassie")
    assert (robot.nq, robot.nv, robot.n_bodies) == (29, 28, 23)
    assert robot.joint_names[:4] == ["root_joint", "left-roll-op", "left-yaw-op", "left-pitch-op"]
    assert [s.split(":")[0] for s in robot.scenarios["loops"]] == [
        "left-hip-pitch|left-achilles-rod", "right-hip-pitch|right-achilles-rod",
        "right-foot|right-plantar-rod", "left-foot|left-plantar-rod"]
    cs = ConstraintSet.parse(robot, robot.scenarios["loops"])
    assert cs.m == 12 and all(c.kind == "3d" and c.body2 is not None for c in cs.constraints)
    # the two points of each loop coincide in the file's configuration (joints at 0)
    model = oracle.model_from_robot(robot)
    data = model.createData()
    pin.forwardKinematics(model, data, pin.neutral(model))
    for c in cs.constraints:
        A = robot.frame(c.link)
        on_a = data.oMi[c.body + 1].act(A.translation + A.rotation @ oracle.point_a(c))
        assert np.linalg.norm(on_a - data.oMi[c.body2 + 1].act(c.point2)) <= 1e-9


def _sdf(tmp_path, body):
    p = tmp_path / "m.sdf"
    p.write_text(f'<sdf version="1.6"><model name="m">{body}</model></sdf>')
    return p


LINK = "<link name='{}'><inertial><mass>1</mass></inertial></link>"


@pytest.mark.parametrize("body, words", [
    ("<link name='a'>", "malformed SDF"),
    (LINK.format("a") + LINK.format("b") + "<joint name='j' type='revolute'><parent>a</parent><child>c</child>"
     "<axis><xyz>0 0 1</xyz></axis></joint>", "joint 'j': its child 'c' is not a link of the model"),
    (LINK.format("a") + LINK.format("b") + "<joint name='j' type='revolute'><parent>a</parent><child>b</child>"
     "<axis><xyz>0 0 1</xyz></axis></joint><joint name='k' type='revolute'><parent>a</parent><child>b</child>"
     "<axis><xyz>1 0 0</xyz></axis></joint>", "joint 'k' closes a loop but is 'revolute'"),
    (LINK.format("a") + LINK.format("b") + "<joint name='j' type='revolute'><parent>a</parent><child>b</child>"
     "</joint>", "joint 'j' has no (nonzero) <axis><xyz>"),
    ("<link name='a'><pose>0 0 1</pose></link>", "expected 6 numbers"),
])
def test_malformed_sdf(tmp_path, body, words):
    with pytest.raises(ModelError) as err:
        load_sdf(_sdf(tmp_path, body))
    assert words in str(err.value)
