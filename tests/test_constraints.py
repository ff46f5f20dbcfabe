"""constraints.py: constraint specs and their rows.  Bad link-to-link and joint specs are one-line errors naming the
offending thing; rows and their names.

World-aligned rows (issue 13 point 2: LINK:3d-world, LINK:6d-world, Pinocchio's LOCAL_WORLD_ALIGNED): every Delassus
algorithm equals J M⁻¹ Jᵀ built from Pinocchio's LOCAL_WORLD_ALIGNED frame Jacobians and its crba
(computeDelassusMatrix ignores the reference frame) over 20 random q, on go1 (feet 3d-world) and talos (soles
6d-world); the dynamics solvers, whose J̇v gains the rotation-rate term, equal Pinocchio's constraintDynamics with
LOCAL_WORLD_ALIGNED contacts and the NumPy reference, whose world rows and drift are checked against Pinocchio's
Jacobians and classical accelerations and against finite differences; the operators; one compiled function through
the CLI; bad specs.  The tests that ask Pinocchio skip without it.

Run with ``-s`` to see the errors."""

import numpy as np
import pytest

from casadi_delassus import api
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ConstraintError
from casadi_delassus.registry import delassus_algorithms, dynamics_algorithms
from casadi_delassus.verify import reference as ref
from casadi_delassus.verify.check import relative_error

from cli_runner import run_cli
from conftest import model_for, tilted_robot

try:
    import pinocchio as pin
except ImportError:         # the spec tests run without it
    pin = None
needs_pinocchio = pytest.mark.skipif(pin is None, reason="Pinocchio (the oracle) is not installed")


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


N = 20
TOL = 1e-10
GO1 = ("go1", ["FL_foot:3d-world", "FR_foot:3d-world", "RL_foot:3d-world", "RR_foot:3d-world"])
TALOS = ("talos", ["left_sole_link:6d-world", "right_sole_link:6d-world"])
# offsets, a world row beside local ones, both kinds on one leg
MIXED = ("go1", ["FL_foot:3d-world@0.01,-0.02,0.03", "FR_foot:3d", "RL_calf:6d-world", "RR_foot:3d-world"])


def setup(robot_name, specs):
    robot = model_for(robot_name)
    cs = ConstraintSet.parse(robot, specs)
    model = pin.buildModelFromUrdf(robot.source, pin.JointModelFreeFlyer())
    return robot, cs, model, model.createData()


def pinocchio_world_jacobian(model, data, cs, q):
    """Rows of getFrameJacobian(..., LOCAL_WORLD_ALIGNED) per spec (3 linear rows for a point,
    moved to its offset p by v_p = v + ω × R p; 6 rows for a weld), Pinocchio's own frames by name."""
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    rows = []
    for spec in cs.specs:
        link, rest = spec.split(":")
        kind, _, offset = rest.partition("@")
        fid = model.getFrameId(link)
        frame = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED if kind.endswith("world") else pin.ReferenceFrame.LOCAL
        J = pin.getFrameJacobian(model, data, fid, frame)
        if kind.startswith("6d"):
            rows.append(J)
            continue
        p = np.array([float(x) for x in offset.split(",")]) if offset else np.zeros(3)
        if kind.endswith("world"):
            w = data.oMf[fid].rotation @ p
            rows.append(J[:3] - pin.skew(w) @ J[3:])
        else:
            rows.append(J[:3] - pin.skew(p) @ J[3:])
    return np.vstack(rows)


def pinocchio_delassus(model, data, cs, q):
    J = pinocchio_world_jacobian(model, data, cs, q)
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    return J @ np.linalg.solve(M, J.T)


# go1-mixed checks a 6d-world weld (RL_calf) too: talos's 6d-world soles (nv = 50, every algorithm) repeat it, slow
@pytest.mark.parametrize("target", [GO1, pytest.param(TALOS, marks=pytest.mark.slow), MIXED],
                         ids=["go1-feet-3d-world", "talos-soles-6d-world", "go1-mixed"])
@needs_pinocchio
def test_delassus_world_rows_match_pinocchio_lwa(target):
    """Done-when 4: every Delassus algorithm, 20 random q, against Pinocchio's LWA J M⁻¹ Jᵀ."""
    robot, cs, model, data = setup(*target)
    rng = np.random.default_rng(13)
    qs = [robot.random_q(rng) for _ in range(N)]
    expected = [pinocchio_delassus(model, data, cs, q) for q in qs]
    for a in delassus_algorithms():
        f = trace(robot, cs, a)[0]
        err = max(relative_error(np.array(f(q=q)["delassus"]), D) for q, D in zip(qs, expected))
        print(f"{robot.name} {a}: {err:.1e}")
        assert err <= TOL, a


@needs_pinocchio
def test_world_rows_are_the_local_rows_turned():
    """Λ⁻¹ of 6d-world = diag(R, R) Λ⁻¹(6d) diag(R, R)ᵀ with R the sole's world rotation (Pinocchio's oMf)."""
    robot, cs, model, data = setup(*TALOS)
    local = ConstraintSet.parse(robot, ["left_sole_link:6d", "right_sole_link:6d"])
    fw, fl = trace(robot, cs, "pv_osim")[0], trace(robot, local, "pv_osim")[0]
    q = robot.random_q(np.random.default_rng(2))
    pin.framesForwardKinematics(model, data, q)
    G = np.zeros((12, 12))
    for k, link in enumerate(["left_sole_link", "right_sole_link"]):
        R = data.oMf[model.getFrameId(link)].rotation
        G[6 * k:6 * k + 3, 6 * k:6 * k + 3] = G[6 * k + 3:6 * k + 6, 6 * k + 3:6 * k + 6] = R
    assert relative_error(np.array(fw(q=q)["delassus"]), G @ np.array(fl(q=q)["delassus"]) @ G.T) <= 1e-13


@pytest.mark.parametrize("target", [GO1, TALOS, MIXED], ids=["go1-feet-3d-world", "talos-soles-6d-world", "go1-mixed"])
@needs_pinocchio
def test_reference_world_rows_and_drift_match_pinocchio(target):
    """The NumPy reference builds world rows from world velocities (not from K): its J and J̇v
    equal Pinocchio's LWA Jacobians and classical accelerations at v̇ = 0 (the time derivative of
    J v; for local 3d rows the spatial acceleration)."""
    robot, cs, model, data = setup(*target)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v = robot.random_q(rng), rng.normal(size=robot.nv)
        J = pinocchio_world_jacobian(model, data, cs, q)
        assert np.abs(ref.constraint_jacobian(robot, cs, q) - J).max() <= 1e-12
        # J̇ v by central differences of J(q(t)) v along q(t) = q ⊕ t v
        h = 1e-6
        Jv = [pinocchio_world_jacobian(model, data, cs, pin.integrate(model, q, s * h * v)) @ v for s in (1, -1)]
        fd = (Jv[0] - Jv[1]) / (2 * h)
        assert np.abs(ref.constraint_drift(robot, cs, q, v) - fd).max() <= 1e-6 * max(1, np.abs(fd).max())


# every solver on go1's feet; the mixed set (offsets, local and world rows, a 6D weld) and talos's
# 6D soles (the 6d-world drift) with a hard and a soft one
DYNAMICS = ([(GO1, a) for a in dynamics_algorithms()] + [(MIXED, "pv"), (MIXED, "ltl_soft"), (TALOS, "pv"),
                                                          (TALOS, "pv_soft")])


@pytest.mark.parametrize("target, algo", DYNAMICS, ids=[f"{t[0]}-{t[1][0].split(':')[1]}-{a}" for t, a in DYNAMICS])
@needs_pinocchio
def test_dynamics_world_rows(target, algo):
    """The solvers take k − K̇v (codegen/trace.py): against the NumPy reference (dense KKT / soft solve,
    its own drift) over random k, and, for the hard ones, against Pinocchio's constraintDynamics
    with LOCAL_WORLD_ALIGNED contacts at our k for its zero constraint acceleration."""
    from casadi_delassus.verify.oracles import get_oracle
    robot, cs, model, data = setup(*target)
    f = trace(robot, cs, algo)[0]
    session = get_oracle("pinocchio").session(robot, cs)
    rng = np.random.default_rng(4)
    worst = {"numpy": 0.0, "pinocchio": 0.0}
    for _ in range(10):
        x = {"q": robot.random_q(rng), "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
             "k": rng.normal(size=cs.m), "K": {}}
        if "ltl_soft" == algo or "pv_soft" == algo:
            x["R"] = rng.uniform(0.1, 1.0, cs.m)
            expected = ref.soft_dynamics(robot, cs, x["q"], x["v"], x["tau"], x["k"], x["R"])
        else:
            expected = ref.constrained_dynamics(robot, cs, x["q"], x["v"], x["tau"], x["k"])
        args = {k: x[k] for k in ("v", "tau", "k", "R") if k in x}
        out = f(q=x["q"], **args)
        worst["numpy"] = max(worst["numpy"], relative_error(np.array(out["vdot"]), expected[0]),
                             relative_error(np.array(out["lam"]), expected[1]))
        if "R" not in x:
            y = session.prepare(x)
            out = f(q=y["q"], **{k: y[k] for k in ("v", "tau", "k")})
            worst["pinocchio"] = max(worst["pinocchio"], relative_error(np.array(out["vdot"]), session.expected("vdot", y)),
                                     relative_error(np.array(out["lam"]), session.expected("lam", y)))
    print(f"{robot.name} {algo}: {worst}")
    assert worst["numpy"] <= 1e-9 and worst["pinocchio"] <= 1e-9


@pytest.mark.parametrize("algo", ["delassus_apply", "damped_inverse_apply", "delassus_explicit_apply",
                                  "damped_inverse_explicit"])
@needs_pinocchio
def test_operators_world_rows(algo):
    robot, cs, model, data = setup(*MIXED)
    f = trace(robot, cs, algo)[0]
    rng = np.random.default_rng(6)
    for _ in range(5):
        q, lam, R = robot.random_q(rng), rng.normal(size=cs.m), rng.uniform(0.1, 1.0, cs.m)
        D = pinocchio_delassus(model, data, cs, q)
        expected = D @ lam if "damped" not in algo else np.linalg.solve(np.diag(1 / R) + D, lam)
        out = f(q=q, lam=lam, **({"R": R} if "damped" in algo else {}))[algo]
        assert relative_error(np.array(out), expected) <= 1e-10


@needs_pinocchio
def test_world_rows_compile_and_check_through_the_cli(tmp_path):
    """One compiled function: `generate` then `check` against both oracles (go1 feet 3d-world)."""
    r = run_cli("check", "go1", "-c", "FL_foot:3d-world", "-c", "RR_foot:6d-world", "-a", "pv_osimr", "-o", tmp_path,
                "--samples", "20")
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("go1 ")]   # not the base line "go1: …"
    assert len(rows) == 2 and all(" ok " in row for row in rows)
    assert {row.split()[3] for row in rows} == {"numpy", "pinocchio"}
    f = api.load(next(tmp_path.rglob("pv_osimr.json")))
    assert f.manifest["outputs"][0]["row_names"][:4] == ["FL_foot.x", "FL_foot.y", "FL_foot.z", "RR_foot.vx"]


@pytest.mark.parametrize("spec, words", [
    ("FL_foot:6d-world@0,0,1", "only 3d and 3d-world take an @x,y,z offset"),
    ("FL_foot|FR_foot:3d-world", "a link-to-link constraint is 3d or 6d"),
    ("FL_foot:2d-world", "unknown type '2d-world'"),
])
def test_bad_world_specs(spec, words):
    robot = model_for("go1")
    with pytest.raises(ConstraintError, match=words.replace("(", r"\(").replace("|", r"\|")):
        ConstraintSet.parse(robot, [spec])


def test_world_rows_have_no_numeric_K():
    """Their K_i depend on q: a numeric caller gets None, never the local rows by mistake."""
    robot = model_for("go1")
    cs = ConstraintSet.parse(robot, ["FL_foot:3d-world", "FR_foot:3d"])
    K = cs.K_body()
    assert K[0] is None and K[1].shape == (3, 6)


def test_parse_or_empty_is_parse_or_the_empty_set():
    """A contact mode's set (contact_modes/, verify/library_check.py): the parsed specs, or the empty set for none."""
    robot = model_for("go1")
    assert ConstraintSet.parse_or_empty(robot, []).m == 0
    assert ConstraintSet.parse_or_empty(robot, ["FL_foot:3d"]).specs == ConstraintSet.parse(robot, ["FL_foot:3d"]).specs
