"""The NumPy oracle (casadi_delassus.verify.reference) against Pinocchio, the external oracle.

Run with ``-s`` to see the measured maximum relative errors per case.
"""
import functools
import importlib.metadata
import pathlib

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

from casadi_delassus.verify import reference as ref  # noqa: E402
from casadi_delassus.constraints import ConstraintSet  # noqa: E402
from casadi_delassus.errors import ConstraintError  # noqa: E402
from casadi_delassus.model.urdf import load_urdf  # noqa: E402
from casadi_delassus.verify import pinocchio_oracle as oracle  # noqa: E402
from casadi_delassus.verify.check import relative_error  # noqa: E402
from conftest import case  # noqa: E402

try:
    ROBOTS = pathlib.Path(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots"))
except importlib.metadata.PackageNotFoundError:  # pragma: no cover
    pytest.skip("example-robot-data is not installed", allow_module_level=True)

FILES = {
    "talos_full_v2": "talos_data/robots/talos_full_v2.urdf",
    "talos_reduced": "talos_data/robots/talos_reduced.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "go2": "go2_description/urdf/go2.urdf",
    "g1_29dof_rev_1_0": "g1_description/urdf/g1_29dof_rev_1_0.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "panda": "panda_description/urdf/panda.urdf",
    # Not required by the layout contract, but the only models with 'continuous' joints.
    "tiago_no_hand": "tiago_description/robots/tiago_no_hand.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",
}
FIXED_BASE = {"panda"}


@functools.lru_cache(maxsize=None)
def load(name):
    """(our Robot, pinocchio Model) for one example-robot-data file, loaded once."""
    path = ROBOTS / FILES[name]
    if name in FIXED_BASE:
        return load_urdf(path, floating_base=False), pin.buildModelFromUrdf(str(path))
    return load_urdf(path), pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())


def symmetrized(M):
    """Pinocchio's crba fills the upper triangle only."""
    return np.triu(M) + np.triu(M, 1).T


def pin_constraints(model, specs):
    """Pinocchio RigidConstraintModels (LOCAL) for our 'LINK:6d' / 'LINK:3d[@x,y,z]' specs."""
    models = pin.StdVec_RigidConstraintModel()
    for spec in specs:
        link, kind = spec.split(":")
        kind, _, offset = kind.partition("@")
        p = np.array([float(x) for x in offset.split(",")]) if offset else np.zeros(3)
        contact = {"6d": pin.ContactType.CONTACT_6D, "3d": pin.ContactType.CONTACT_3D}[kind]
        frame = model.frames[model.getFrameId(link)]
        models.append(pin.RigidConstraintModel(contact, model, frame.parentJoint,
                                               frame.placement * pin.SE3(np.eye(3), p),
                                               pin.ReferenceFrame.LOCAL))
    datas = pin.StdVec_RigidConstraintData()
    for m in models:
        datas.append(m.createData())
    return models, datas


# -- 1. q layout ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(FILES))
def test_q_layout_matches_pinocchio(name):
    robot, model = load(name)
    assert robot.joint_names == list(model.names)[1:]
    assert (robot.nq, robot.nv) == (model.nq, model.nv)
    for b in robot.bodies:
        j = model.getJointId(b.joint.name)
        assert (b.q_index, b.v_index) == (model.idx_qs[j], model.idx_vs[j]), b.joint.name
        assert (b.joint.nq, b.joint.nv) == (model.nqs[j], model.nvs[j]), b.joint.name


# -- 2. mass matrix ------------------------------------------------------------------------
def test_mass_matrix_matches_crba():
    robot, model = load("talos_full_v2")
    data = model.createData()
    worst = 0.0
    for seed in range(20):
        q = robot.random_q(np.random.default_rng(seed))
        M = ref.mass_matrix(robot, q)
        worst = max(worst, relative_error(M, symmetrized(pin.crba(model, data, q))))
        assert np.array_equal(M, M.T)
    print(f"\nmass_matrix talos_full_v2: max rel err {worst:.2e}")
    assert worst <= 1e-10


# -- 3. Delassus matrix --------------------------------------------------------------------
DELASSUS_CASES = {
    "talos_full_v2 2F6d": ("talos_full_v2", ["left_sole_link:6d", "right_sole_link:6d"]),
    "talos_reduced 4F6d": ("talos_reduced", ["left_sole_link:6d", "right_sole_link:6d",
                                             "gripper_left_base_link:6d", "gripper_right_base_link:6d"]),
    "go1 4F3d": ("go1", ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]),
    "panda 1F6d": ("panda", ["panda_hand_tcp:6d"]),
    "talos_full_v2 3d offset": ("talos_full_v2", ["left_sole_link:3d@0.1,-0.05,0.0",
                                                  "right_sole_link:6d"]),
    # (cos, sin) continuous joints and a prismatic torso.  cond(M) ~ 2e7 here: the error
    # (up to 7e-11) is Pinocchio's own; ours equals pin's dense J M^-1 J^T to 2e-15.
    "tiago_no_hand wheels+hand": ("tiago_no_hand", ["wheel_left_link:3d", "wheel_right_link:3d",
                                                    "arm_7_link:6d"]),
    "kinova 1F6d": ("kinova", ["j2s6s200_end_effector:6d"]),
}


@pytest.mark.parametrize("case", list(DELASSUS_CASES))
def test_delassus_matches_pinocchio(case):
    name, specs = DELASSUS_CASES[case]
    robot, model = load(name)
    data = model.createData()
    constraints = ConstraintSet.parse(robot, specs)
    models, datas = pin_constraints(model, specs)
    worst = 0.0
    for seed in range(50):
        q = robot.random_q(np.random.default_rng(seed))
        D = ref.delassus(robot, constraints, q)
        D_pin = pin.computeDelassusMatrix(model, data, q, models, datas)
        assert D.shape == (constraints.m, constraints.m)
        worst = max(worst, relative_error(D, D_pin))
    print(f"\ndelassus {case}: max rel err over 50 q {worst:.2e}")
    assert worst <= 1e-9


# -- 4. Jacobian and runtime-input K -------------------------------------------------------
def test_constraint_jacobian_matches_frame_jacobian():
    robot, model = load("talos_full_v2")
    data = model.createData()
    specs = ["left_sole_link:6d", "right_sole_link:3d"]
    constraints = ConstraintSet.parse(robot, specs)
    worst = 0.0
    for seed in range(5):
        q = robot.random_q(np.random.default_rng(100 + seed))
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        J_pin = np.vstack([
            pin.getFrameJacobian(model, data, model.getFrameId("left_sole_link"), pin.ReferenceFrame.LOCAL)[:6],
            pin.getFrameJacobian(model, data, model.getFrameId("right_sole_link"), pin.ReferenceFrame.LOCAL)[:3],
        ])
        worst = max(worst, relative_error(ref.constraint_jacobian(robot, constraints, q), J_pin))
    print(f"\nconstraint_jacobian talos_full_v2: max rel err {worst:.2e}")
    assert worst <= 1e-10


def test_runtime_input_K_is_a_congruence_of_the_6d_block():
    robot, _ = load("talos_full_v2")
    weld = ConstraintSet.parse(robot, ["left_sole_link:6d"])
    general = ConstraintSet.parse(robot, ["left_sole_link:6d-input"])
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = robot.random_q(rng)
        K_inputs = general.random_inputs(rng)
        K = K_inputs[general.constraints[0].input_name]
        expected = K @ ref.delassus(robot, weld, q) @ K.T
        assert relative_error(ref.delassus(robot, general, q, K_inputs), expected) <= 1e-12


def test_osim_inverts_delassus_and_rejects_redundant_constraints():
    robot, _ = load("talos_full_v2")
    q = robot.random_q(np.random.default_rng(3))
    constraints = ConstraintSet.parse(robot, ["left_sole_link:6d", "right_sole_link:6d"])
    Lam = ref.osim(robot, constraints, q)
    assert np.allclose(Lam @ ref.delassus(robot, constraints, q), np.eye(12), atol=1e-8)
    redundant = ConstraintSet.parse(robot, ["left_sole_link:6d", "left_sole_link:3d"])
    with pytest.raises(ConstraintError, match="rank-deficient"):
        ref.osim(robot, redundant, q)


# -- 5. bias forces and forward dynamics ---------------------------------------------------
@pytest.mark.parametrize("name", ["talos_full_v2", "panda", "go1", "kinova"])
def test_bias_and_forward_dynamics_match_rnea_aba(name):
    robot, model = load(name)
    data = model.createData()
    rng = np.random.default_rng(11)
    worst_b = worst_a = 0.0
    for _ in range(10):
        q, v, tau = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        worst_b = max(worst_b, relative_error(ref.bias_forces(robot, q, v), pin.rnea(model, data, q, v, 0 * v)))
        worst_a = max(worst_a, relative_error(ref.forward_dynamics(robot, q, v, tau), pin.aba(model, data, q, v, tau)))
    print(f"\n{name}: bias_forces max rel err {worst_b:.2e}, forward_dynamics {worst_a:.2e}")
    assert worst_b <= 1e-9 and worst_a <= 1e-9


@pytest.mark.parametrize("name", ["go2-foot-to-foot", "talos-hands-welded"])
def test_reference_jacobian_of_link_to_link_rows_is_pinocchios(name):
    robot, cs = case(name)
    model = oracle.model_for(robot)
    cms, data = oracle.constraint_models(model, robot, cs), model.createData()
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = robot.random_q(rng)
        _, cds = oracle.delassus_expression(model, data, cms, q, 0.0)
        J = pin.getConstraintsJacobian(model, data, cms, cds)
        assert np.abs(J - ref.constraint_jacobian(robot, cs, q)).max() <= 1e-12
