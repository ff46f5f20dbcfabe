"""MJCF models (issue 13) loaded through MuJoCo (model/mjcf.py), against MuJoCo itself
(verify/mujoco_oracle.py: its own compile of the file, mj_fullM, mj_jac, mj_forward) and the
NumPy reference, q passed as data.qpos and v as data.qvel: gymnasium's MuJoCo assets (free,
hinge and slide joints, several joints in one body, joint refs, armature, unnamed bodies) and
tests/models/mjcf_ball_creature.xml (ball joints with anchors, welded bodies, sites, rotated
inertial frames).  Traced functions evaluated numerically; one compiled case through
``cd.generate`` and one through the CLI.  Run with ``-s`` to see the measured errors."""
import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ModelError
from casadi_delassus.model import load_robot
from casadi_delassus.registry import ALGORITHMS
from casadi_delassus.verify import reference as ref
from casadi_delassus.verify.check import relative_error

mujoco = pytest.importorskip("mujoco")
from casadi_delassus.verify import mujoco_oracle as mo  # noqa: E402

from cli_runner import run_cli

N = 20
TOL = 1e-9
CREATURE = Path(__file__).parents[1] / "models" / "mjcf_ball_creature.xml"


def gymnasium_asset(name):
    gymnasium = pytest.importorskip("gymnasium")
    return Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{name}.xml"


# model -> contact frames (bodies, MuJoCo's unnamed ant feet as bodyN, sites of the creature)
MODELS = {
    "ant": ["body4:3d@0.4,0.4,0", "body7:3d@-0.4,0.4,0", "body10:3d@-0.4,-0.4,0", "body13:3d@0.4,-0.4,0"],
    "hopper": ["foot:6d"],
    "walker2d": ["foot:3d", "foot_left:3d@0.1,0,0"],
    "half_cheetah": ["bfoot:6d", "ffoot:3d"],
    "swimmer": ["back:3d", "mid:6d"],
    "humanoid": ["left_foot:6d", "right_foot:6d", "left_lower_arm:3d@0.18,0.18,0.18"],
    "ball_creature": ["toe:3d", "palm:6d", "hand:3d@0.1,0,0", "eye:3d", "shin:6d", "forearm:3d"],
    "dm_ball_joints": ["gripsite:6d"],
}


def model_path(name):
    if name == "dm_ball_joints":        # dm_control's ball-joint test model (make setup installs its files)
        spec = importlib.util.find_spec("dm_control")
        if spec is None:
            pytest.skip("dm_control's model files are not installed")
        return Path(spec.origin).parent / "mujoco" / "testing" / "assets" / "model_with_ball_joints.xml"
    return CREATURE if name == "ball_creature" else gymnasium_asset(name)


# hard dynamics need independent rows: the creature's full set has 24 rows for nv = 19
DYNAMICS_SETS = {"ball_creature": ("toe:3d", "palm:6d", "eye:3d"), "humanoid": tuple(MODELS["humanoid"]),
                 "ant": tuple(MODELS["ant"])}


@functools.lru_cache(maxsize=None)
def case(name, specs=None):
    robot = load_robot(model_path(name))
    return robot, ConstraintSet.parse(robot, list(specs or MODELS[name]))


@functools.lru_cache(maxsize=None)
def traced(name, algorithm, specs=None):
    robot, cs = case(name, specs)
    return trace(robot, cs, algorithm)[0]


def delassus_algorithms(cs):
    return [a for a, algo in ALGORITHMS.items() if "delassus" in algo.outputs and algo.accepts(cs)]


def test_the_models_cover_ball_slide_and_armature():
    """The cases hold what issue 13 asks for: ball joints, slide joints, armature, a body with
    several joints, sites."""
    kinds = {a: {b.joint.kind for b in case(a)[0].bodies} for a in MODELS}
    assert "ball" in kinds["ball_creature"] and "ball" in kinds["dm_ball_joints"] and "prismatic" in kinds["hopper"] | kinds["walker2d"]
    assert any(np.any(case(a)[0].armature) for a in MODELS)
    assert "shin__knee_slide" in {b.name for b in case("ball_creature")[0].bodies}
    assert len(MODELS) >= 6


@pytest.mark.parametrize("name", list(MODELS))
def test_q_is_qpos(name):
    """nq, nv, the joints' qpos/qvel addresses, armature and gravity are MuJoCo's."""
    robot, _ = case(name)
    model = mujoco.MjModel.from_xml_path(str(model_path(name)))
    assert (robot.nq, robot.nv, robot.q_convention) == (model.nq, model.nv, "mujoco")
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)]
    for entry, j in zip(robot.q_layout(), range(model.njnt)):
        assert (entry["q_index"], entry["v_index"]) == (model.jnt_qposadr[j], model.jnt_dofadr[j])
        assert names[j] in (None, entry["joint"])
    assert np.array_equal(robot.armature, model.dof_armature)
    assert np.array_equal(robot.gravity, model.opt.gravity)


@pytest.mark.parametrize("name", list(MODELS))
def test_delassus_matches_mujoco(name):
    """Every Delassus algorithm that accepts the constraints, and the NumPy reference (its M
    too), equal MuJoCo's J M⁻¹ Jᵀ (mj_fullM with armature, mj_jac rotated into the frame) over
    20 random qpos: random joint values and unit quaternions, passed as data.qpos."""
    robot, cs = case(name)
    path = model_path(name)
    rng = np.random.default_rng(13)
    algorithms = delassus_algorithms(cs)
    assert len(algorithms) >= 5
    worst = dict.fromkeys([*algorithms, "reference", "M"], 0.0)
    for _ in range(N):
        q = robot.random_q(rng)
        D = mo.delassus(path, MODELS[name], q)
        worst["M"] = max(worst["M"], relative_error(ref.mass_matrix(robot, q), mo.mass_matrix(path, q)))
        worst["reference"] = max(worst["reference"], relative_error(ref.delassus(robot, cs, q), D))
        for a in algorithms:
            worst[a] = max(worst[a], relative_error(traced(name, a)(q=q)["delassus"], D))
    print(name, {a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL


@pytest.mark.parametrize("name", list(MODELS))
def test_aba_matches_mujoco_qacc(name):
    """aba(qpos, qvel, τ) = MuJoCo's qacc (mj_forward with qfrc_applied = τ; constraints, passive
    forces and actuators disabled), and the reference's forward dynamics too."""
    robot, _ = case(name)
    path = model_path(name)
    rng = np.random.default_rng(14)
    worst = {"aba": 0.0, "reference": 0.0}
    for _ in range(N):
        q, v, tau = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qacc = mo.forward(path, q, v, tau)
        worst["aba"] = max(worst["aba"], relative_error(traced(name, "aba")(q=q, v=v, tau=tau)["vdot"], qacc))
        worst["reference"] = max(worst["reference"], relative_error(ref.forward_dynamics(robot, q, v, tau), qacc))
    print(name, {a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL


@pytest.mark.parametrize("specs", [["body4:3d-world@0.4,0.4,0", "body7:3d@-0.4,0.4,0", "body10:3d-world@-0.4,-0.4,0"],
                                   ["body10:6d-world"]])
def test_world_aligned_rows_match_mujoco(specs):
    """`-world` rows (MuJoCo's own axes, as its connect rows are) against MuJoCo's world Jacobians:
    the Delassus matrix and the hard dynamics (J̇v from mj_jacDot without turning), beside local
    rows, on the ant's free joint with MuJoCo's velocities (the rotation-rate term K̇v takes them
    turned local first, as the solvers do)."""
    path = model_path("ant")
    robot = load_robot(path)
    cs = ConstraintSet.parse(robot, specs)
    naive, pv = trace(robot, cs, "naive")[0], trace(robot, cs, "pv")[0]
    rng = np.random.default_rng(21)
    worst = {"naive": 0.0, "pv": 0.0}
    for _ in range(N):
        q, v, tau, k = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=cs.m)
        worst["naive"] = max(worst["naive"], relative_error(naive(q=q)["delassus"], mo.delassus(path, specs, q)))
        vdot, _ = mo.constrained(path, specs, q, v, tau, k)
        worst["pv"] = max(worst["pv"], relative_error(pv(q=q, v=v, tau=tau, k=k)["vdot"], vdot))
    print({a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL


def test_armature_is_read_and_matters():
    """The creature with its armature equals MuJoCo, and without it (ours zeroed, MuJoCo's
    dof_armature zeroed) equals MuJoCo again, while the two differ by far more than the
    tolerance: the armature read from the file is what makes the first agree."""
    robot, cs = case("ball_creature")
    bare = load_robot(CREATURE)
    bare.armature = 0.0
    compiled = mujoco.MjModel.from_xml_path(str(CREATURE))
    compiled.dof_armature[:] = 0
    rng = np.random.default_rng(15)
    gap = 0.0
    for _ in range(5):
        q = robot.random_q(rng)
        with_arm, without = mo.delassus(CREATURE, MODELS["ball_creature"], q), mo.delassus(compiled, MODELS["ball_creature"], q)
        assert relative_error(ref.delassus(robot, cs, q), with_arm) <= TOL
        assert relative_error(ref.delassus(bare, cs, q), without) <= TOL
        gap = max(gap, relative_error(without, with_arm))
    assert gap > 1e-3


def test_frames_of_an_mjcf_model():
    """Sites and welded bodies are frames; a body's name is MuJoCo's body frame even where its
    joint sits elsewhere in it (its Robot body is at the anchor); several joints in one body are
    massless bodies named BODY__JOINT; bodies welded to the world are left out."""
    robot, _ = case("ball_creature")
    frames = robot.frames
    assert {"toe", "palm", "eye", "chest", "head_mount", "foot"} <= set(frames)
    assert "post_top" not in frames and "static_post" not in frames
    assert np.allclose(frames["upper_arm"].translation, [-0.02, 0.03, -0.05])      # shoulder at pos="0.02 -0.03 0.05"
    bodies = {b.name: b for b in robot.bodies}
    assert bodies["forearm__elbow_flex"].mass == 0 and bodies["forearm"].mass > 0
    assert frames["foot"].body == robot.frames["shin"].body


def test_a_urdf_named_xml_goes_to_the_urdf_loader(tmp_path):
    urdf = tmp_path / "arm.xml"
    urdf.write_text("""<?xml version="1.0"?>
<!-- a URDF despite its name -->
<robot name="arm"><link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l1"><inertial><mass value="1"/><origin xyz="0 0 0.1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    robot = load_robot(urdf)
    assert robot.q_convention == "pinocchio" and robot.joint_names == ["root_joint", "j1"]


def test_missing_meshes_are_dropped_and_said(tmp_path, capsys):
    (tmp_path / "meshy.xml").write_text("""<mujoco model="meshy"><asset><mesh name="shell" file="gone.stl"/></asset>
<worldbody><body name="base"><freejoint/><geom type="mesh" mesh="shell"/><geom type="sphere" size="0.1"/>
 <body name="arm" pos="0 0 0.2"><joint name="j" axis="0 1 0"/>
  <inertial pos="0 0 0.1" mass="1" diaginertia="0.01 0.01 0.002"/><site name="tip" pos="0 0 0.2"/></body>
</body></worldbody></mujoco>""")
    robot = load_robot(tmp_path / "meshy.xml")
    err = capsys.readouterr().err
    assert "gone.stl" in err and "without its 1 meshes (shell)" in err and len(err.strip().splitlines()) == 1
    assert robot.nv == 7 and "tip" in robot.frames


@pytest.mark.parametrize("text,match", [
    ("<mujoco><worldbody><body><joint type='hinge'/></body></worldbody>", "MuJoCo cannot load"),
    ("<mujoco><worldbody><body name='a'><geom type='sphere' size='0.1'/><body name='b'><freejoint/>"
     "<geom type='sphere' size='0.1'/></body></body></worldbody></mujoco>", "free joint"),
])
def test_bad_mjcf_is_one_line(tmp_path, text, match):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(ModelError, match=match) as info:
        load_robot(path)
    assert "\n" not in str(info.value)
    result = run_cli("count", path, "-c", "a:3d")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_site_named_like_its_body_is_the_frame_name_site(tmp_path):
    """MuJoCo keeps site and body names apart (dm_control names sites like their bodies): the
    body keeps the name, the site becomes ``<name>_site``, and both are where MuJoCo puts them."""
    path = tmp_path / "named.xml"
    path.write_text("<mujoco><worldbody><body name='a'><joint type='hinge' axis='0 1 0'/>"
                    "<geom type='sphere' size='0.1' pos='0 0 0.3'/><site name='a' pos='0 0 0.3'/></body>"
                    "</worldbody></mujoco>")
    robot = load_robot(path)
    assert "a" in robot.frames and "a_site" in robot.frames
    q = robot.random_q(np.random.default_rng(1))
    for spec in ("a:3d", "a_site:3d"):
        cs = ConstraintSet.parse(robot, [spec])
        ours = trace(robot, cs, "naive")[0](q=q)["delassus"]
        assert relative_error(ours, mo.delassus(path, [spec], q)) < 1e-12


def test_without_mujoco_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ModelError, match=r"need the 'mujoco' package: pip install"):
        load_robot(CREATURE)


def test_generated_code_takes_qpos(out_dir):
    """One compiled function (cd.generate on the .xml path) against MuJoCo at data.qpos."""
    f = cd.generate(str(CREATURE), ["toe:3d", "palm:6d"], "pv_osim", out_dir=out_dir)
    assert f.manifest["q_convention"] == "mujoco"
    robot, _ = case("ball_creature")
    data = mujoco.MjData(mujoco.MjModel.from_xml_path(str(CREATURE)))
    rng = np.random.default_rng(16)
    for _ in range(5):
        data.qpos[:] = robot.random_q(rng)
        assert relative_error(f(data.qpos), mo.delassus(CREATURE, ["toe:3d", "palm:6d"], data.qpos)) <= TOL


def test_cli_checks_an_mjcf_file(out_dir):
    result = run_cli("check", model_path("hopper"), "-c", "foot:3d", "-a", "aba", "-o", out_dir, "--samples", "20")
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


@pytest.mark.parametrize("name", ["ball_creature", "humanoid", "ant"])
def test_mujoco_session_judges_every_output(name):
    """The oracle ``check --oracle mujoco`` asks (MujocoSession): rnea's τ = mj_inverse, hard
    and soft dynamics (pv, pv_soft, ltl) from MuJoCo's M, bias, J and J̇v (mj_jacDot), the
    damped inverse, against our traced functions; rows it cannot judge are not_applicable."""
    specs = DYNAMICS_SETS[name]
    robot, cs = case(name, specs)
    session = mo.MujocoSession(robot, cs)
    rng = np.random.default_rng(17)
    worst = dict.fromkeys(["rnea", "pv", "pv_soft", "ltl", "damped_inverse_apply"], 0.0)
    for _ in range(10):
        q, v, tau = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        k, R, lam = rng.normal(size=cs.m), rng.uniform(0.1, 1, cs.m), rng.normal(size=cs.m)
        x = {"q": q, "v": v, "tau": tau, "a": tau, "k": k, "K": {}, "lam": lam}
        worst["rnea"] = max(worst["rnea"], relative_error(traced(name, "rnea", specs)(q=q, v=v, a=tau)["tau"],
                                                         session.expected("tau", x)))
        for a in ("pv", "ltl"):
            out = traced(name, a, specs)(q=q, v=v, tau=tau, k=k)
            worst[a] = max(worst[a], relative_error(out["vdot"], session.expected("vdot", x)),
                           relative_error(out["lam"], session.expected("lam", x)) / np.linalg.cond(session.delassus(x)))
        soft = traced(name, "pv_soft", specs)(q=q, v=v, tau=tau, k=k, R=R)
        worst["pv_soft"] = max(worst["pv_soft"], relative_error(soft["vdot"], session.expected("vdot", dict(x, R=R))))
        damped = traced(name, "damped_inverse_apply", specs)(q=q, R=R, lam=lam)["damped_inverse_apply"]
        worst["damped_inverse_apply"] = max(worst["damped_inverse_apply"],
                                            relative_error(damped, session.expected("damped_inverse_apply", dict(x, R=R))))
    print(name, {a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL
    pair = mo.MujocoSession(robot, ConstraintSet.parse(robot, [MODELS[name][0], f"JOINT:{robot.bodies[-1].joint.name}"]))
    with pytest.raises(LookupError, match="LINK:3d"):
        pair.expected("delassus", x)


EQUALITY = Path(__file__).parents[1] / "models" / "mjcf_equality.xml"


def test_equality_constraints_become_a_scenario(capsys):
    """connect (bodies with MuJoCo's compiled anchors, sites, to the world) and weld (between
    bodies, to the world) are the scenario 'equality'; the inactive and the joint equality are
    left out, said on stderr."""
    robot = load_robot(EQUALITY)
    assert "off (inactive), coupled (joint)" in capsys.readouterr().err
    specs = robot.scenarios["equality"]
    assert specs[0].startswith("coupler|rocker:3d@0.5,0.0,0.1;") and specs[1:] == [
        "coupler_end|rocker_end:3d", "pendulum:3d@0.0,0.0,-0.4", "box:3d@0.1,0.08,0.05", "lid|box:6d", "knob:6d"]


def test_equality_scenario_matches_mujoco():
    """Every Delassus algorithm that takes link-to-link rows, on the equality scenario, equals
    MuJoCo's J M⁻¹ Jᵀ (mj_jac on both ends, A's axes) over 20 qpos; and the connect rows equal
    MuJoCo's own equality rows (efc_J of mj_forward with the equalities on: the world's axes,
    so ours rotated by A's orientation), which checks the anchors the scenario carries."""
    robot = load_robot(EQUALITY)
    specs = robot.scenarios["equality"]
    cs = ConstraintSet.parse(robot, specs)
    algorithms = delassus_algorithms(cs)
    assert {"naive", "ltl_osim"} <= set(algorithms)
    fs = {a: trace(robot, cs, a)[0] for a in algorithms}
    compiled = mujoco.MjModel.from_xml_path(str(EQUALITY))
    compiled.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    data = mujoco.MjData(compiled)
    rng = np.random.default_rng(18)
    worst = dict.fromkeys([*algorithms, "reference", "efc_J connect"], 0.0)
    for _ in range(N):
        q = robot.random_q(rng)
        D = mo.delassus(EQUALITY, specs, q)
        worst["reference"] = max(worst["reference"], relative_error(ref.delassus(robot, cs, q), D))
        for a, f in fs.items():
            worst[a] = max(worst[a], relative_error(f(q=q)["delassus"], D))
        data.qpos[:] = q
        mujoco.mj_forward(compiled, data)
        connect = [i for i in range(data.nefc) if data.efc_type[i] == mujoco.mjtConstraint.mjCNSTR_EQUALITY
                   and compiled.eq_type[data.efc_id[i]] == mujoco.mjtEq.mjEQ_CONNECT]
        J_efc = data.efc_J.reshape(data.nefc, compiled.nv)[connect]
        R = [data.xmat[mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, b)].reshape(3, 3) for b in ("coupler",)]
        R += [data.site_xmat[mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_SITE, "coupler_end")].reshape(3, 3)]
        R += [data.xmat[mujoco.mj_name2id(compiled, mujoco.mjtObj.mjOBJ_BODY, b)].reshape(3, 3) for b in ("pendulum", "box")]
        ours = mo.jacobian(EQUALITY, specs[:4], q)
        rotated = np.vstack([Ri @ ours[3 * i:3 * i + 3] for i, Ri in enumerate(R)])
        worst["efc_J connect"] = max(worst["efc_J connect"], relative_error(rotated, J_efc))
    print({a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL


def test_soft_solvers_match_mujocos_own_solver():
    """MuJoCo solves its connect equality constraints (to the world: the ball-jointed pendulum,
    a corner of the free box; the others switched off) as a soft Gauss problem: pv_soft and
    ltl_soft at its compliance efc_R and k = R_Aᵀ aref + J̇v give its qacc and efc_force."""
    specs = ["pendulum:3d@0.0,0.0,-0.4", "box:3d@0.1,0.08,0.05"]
    robot = load_robot(EQUALITY)
    assert set(specs) <= set(robot.scenarios["equality"])
    cs = ConstraintSet.parse(robot, specs)
    fs = {a: trace(robot, cs, a)[0] for a in ("pv_soft", "ltl_soft")}
    model = mujoco.MjModel.from_xml_path(str(EQUALITY))
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_EQUALITY, e) for e in range(model.neq)]
    model.eq_active0[:] = [n in ("hang", "box_corner") for n in names]
    rng = np.random.default_rng(19)
    worst = dict.fromkeys(fs, 0.0)
    for _ in range(N):
        q, v, tau = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        qacc, lam, k, R = mo.soft_equality(model, specs, q, v, tau)
        for a, f in fs.items():
            out = f(q=q, v=v, tau=tau, k=k, R=R)
            worst[a] = max(worst[a], relative_error(out["vdot"], qacc), relative_error(out["lam"], lam))
    print({a: f"{e:.1e}" for a, e in worst.items()})
    assert max(worst.values()) <= TOL


def test_a_long_preamble_does_not_hide_a_urdf(tmp_path):
    """The root element decides, however much comes before it (a licence header of 10 kB)."""
    urdf = tmp_path / "long.xml"
    urdf.write_text("<?xml version='1.0'?>\n<!--" + "licence text " * 800 + "-->\n"
                    "<robot name='one'><link name='base'><inertial><mass value='1'/>"
                    "<inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/></inertial></link></robot>")
    assert load_robot(urdf).q_convention == "pinocchio"
    (tmp_path / "broken.xml").write_text("<mujoco><worldbody>")
    with pytest.raises(ModelError, match="MuJoCo cannot load .*XML_ERROR_MISMATCHED_ELEMENT") as info:
        load_robot(tmp_path / "broken.xml")
    assert "\n" not in str(info.value)
