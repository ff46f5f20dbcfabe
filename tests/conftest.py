"""Shared fixtures and cases: one output folder for compiled code per test session, the shared/
folder that sits beside the repository (papers, anchors), the test robots, and the scenarios
the test modules draw their cases from (``case``)."""
import dataclasses
import functools
import importlib.metadata
import re
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

from casadi_delassus import load_robot
from casadi_delassus.codegen.build import forced_level
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import Robot
from casadi_delassus.model.registry import is_available, registry
from casadi_delassus.model.robot import Body, Joint
from casadi_delassus.simulation import simulate as sim

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ANCHOR_JSON = SHARED / "anchors" / "talos_spatial_v2_model.json"
# the papers' Talos constraint sets (../shared/anchors/README.md), scenarios of the registry's talos
ANCHOR_SPECS = registry()["talos"]["scenarios"]["anchor"]
DYNAMICS_ANCHOR_SPECS = registry()["talos"]["scenarios"]["anchor-dynamics"]


# a 2 kg box and its four bottom corners as contact candidates (tests/simulation/test_simulate.py, test_rollout.py)
BOX = """<robot name="box"><link name="box"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""
BOX_CORNERS = [f"box@{x},{y},-0.05" for x in (0.1, -0.1) for y in (0.08, -0.08)]


def tilted_box(box, angle):
    """The box turned ``angle`` (rad) about x, 2 cm above the ground: its corners land at different depths."""
    q = box.neutral_q()
    q[3:7] = [np.sin(angle / 2), 0.0, 0.0, np.cos(angle / 2)]
    return sim.place(sim.Scene(box, BOX_CORNERS), q, 0.02)


# The level of the builds whose tests check values, not the level: make test's forced one (-O0, codegen/build.py
# AUTO_LEVEL_ENV; the 76 builds at -O1 were a third of the suite's gcc time), else -O1.  A bare level, not "auto":
# -march=native would let gcc contract to FMAs, rounding otherwise than the code the tests were written on.
TEST_LEVEL = forced_level() or "-O1"
TEST_CFLAGS = (TEST_LEVEL,)


@pytest.fixture(scope="session")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("codegen_out")


@pytest.fixture(scope="session")
def stand():
    """go1 standing on its four feet (verify/contact_problems.py's go1_stand: q, τ and the contact problem)."""
    pytest.importorskip("pinocchio")
    from casadi_delassus.verify import contact_problems
    return contact_problems.build("go1_stand")


def tilted_robot():
    """A floating base with two branches: revolute joints about tilted and coordinate axes,
    a tilted prismatic joint, a continuous joint, rotated joint frames."""
    rng = np.random.default_rng(5)
    spec = [("free", None, -1), ("revolute", [0.6, 0.8, 0], 0), ("prismatic", [0, 0.6, 0.8], 1),
            ("revolute", [0, 0, 1], 2), ("continuous", [1, 0, 0], 3), ("revolute", [0.48, 0.6, 0.64], 4),
            ("revolute", [0, 1, 0], 0), ("revolute", [1, 1, 1], 6)]
    bodies = []
    for i, (kind, axis, parent) in enumerate(spec):
        offset = rng.normal(size=3) * 0.3
        E = np.linalg.qr(rng.normal(size=(3, 3)))[0] if i % 2 else np.eye(3)
        bodies.append(Body(f"t{i}", parent, Joint(f"tj{i}", kind, None if axis is None else np.array(axis, float)),
                           E if parent >= 0 else np.eye(3), offset if parent >= 0 else np.zeros(3), 1.0 + i,
                           rng.normal(size=3) * 0.05, np.diag([0.02, 0.03, 0.025]) + 0.002))
    return Robot("tilted", bodies)


def forest_robot():
    """Two trees, a floating chain and a fixed one: constraints on different trees decouple."""
    trees = [(prefix, load_robot(spec)) for prefix, spec in (("a_", "chain:n=4,floating=1"), ("b_", "chain:n=3"))]
    bodies, offset = [], 0
    for prefix, tree in trees:
        for b in tree.bodies:
            bodies.append(dataclasses.replace(
                b, name=prefix + b.name, parent=b.parent + offset if b.parent >= 0 else -1,
                joint=dataclasses.replace(b.joint, name=prefix + b.joint.name)))
        offset += tree.n_bodies
    return Robot("forest", bodies)


def model_for(spec):
    """A robot for a test case: 'tilted', 'forest', a registry name (skipped when its package
    is missing), a synthetic spec, or 'erd:' + a file of example-robot-data."""
    custom = {"tilted": tilted_robot, "forest": forest_robot}
    if spec in custom:
        return custom[spec]()
    if spec.startswith("mjcf:"):        # a model of tests/models/ (MuJoCo's conventions: wxyz, qvel)
        pytest.importorskip("mujoco")
        return load_robot(str(Path(__file__).parent / "models" / spec[5:]))
    if spec.startswith("erd:"):
        try:
            root = importlib.metadata.distribution("example-robot-data").locate_file(
                "cmeel.prefix/share/example-robot-data/robots")
        except importlib.metadata.PackageNotFoundError:
            pytest.skip("example-robot-data is not installed")
        return load_robot(str(root / spec[4:]))
    if ":" not in spec and not is_available(spec):
        pytest.skip(f"robot {spec} is not installed")
    return load_robot(spec)


# case -> (robot, scenario name or constraint specs); each test module picks its cases by name
CASES = {
    "talos-2F": ("talos", "2F"),
    "talos-2F+2H": ("talos", "2F+2H"),               # floating base, 6D welds on frames, arms off the torso
    "talos-2F4x3": ("talos", "2F4x3"),
    "talos-anchor": ("talos", "anchor"),
    "go1-4F3": ("go1", "4F3"),                       # 3D point contacts
    "panda-EE6": ("panda", "EE6"),                   # fixed base
    "stem": ("stem:n=10,branches=4,length=7", "default"),
    "kchain": ("kchain:k=5", "default"),
    "ladder": ("ladder:rungs=4", "default"),         # m ~ n, rungs coupled through the rail
    "ladder-small": ("ladder:rungs=2,length=3", "default"),     # the same closed loops at a size that builds fast
    "chain-all": ("chain:n=8,all=1", "default"),
    "chain-floating": ("chain:n=8,floating=1", "default"),
    # several constraints on one link, and on a link and its ancestors; rotated joint frames
    "chain-shared-links": ("chain:n=8,floating=1,rot=1",
                           ["link3:6d", "link3:3d@0.1,0.2,0.3", "link5:random6", "link8:3d-input", "link3:random3"]),
    "chain-shared-tip": ("chain:n=8,floating=1,rot=1",
                         ["link8:6d", "link8:3d@0.1,0.2,0.3", "link5:random6", "link8:3d-input", "link1:random3"]),
    # rows that reach the floating base (a weld 3 joints from it), a runtime K, a constraint on the base
    "chain-base": ("chain:n=8,floating=1,rot=1", ["link4:6d", "link8:3d-input", "link1:random3"]),
    "talos-arm-shared": ("talos", ["arm_left_7_link:6d", "gripper_left_base_link:3d@0.1,0,0",
                                   "arm_left_4_link:random6", "arm_left_7_link:6d-input"]),
    "talos-arm": ("talos", ["gripper_left_base_link:6d", "gripper_left_base_link:3d@0.1,0,0",
                            "arm_left_4_link:random3", "torso_2_link:3d-input", "left_sole_link:6d"]),
    # a prismatic joint (finger) and rotated joint frames on the constraint paths
    "panda-finger": ("panda", ["panda_hand_tcp:6d", "panda_leftfinger:3d-input", "panda_rightfinger:3d@0,0.01,0.02"]),
    "panda-finger-points": ("panda", ["panda_hand_tcp:3d", "panda_leftfinger:3d-input"]),
    # 'continuous' joints ((cos, sin) in q) under a free base
    "kinova": ("erd:kinova_description/robots/kinova.urdf", ["j2s6s200_link_6:6d-input", "j2s6s200_link_3:3d@0.1,0,0"]),
    "forest": ("forest", ["a_link4:6d-input", "b_link3:6d", "a_link2:3d"]),
    # joint axes off the coordinate axes (generic paths), a tilted prismatic joint, two branches
    "tilted": ("tilted", ["t5:6d-input", "t3:3d@0.1,0,0.05", "t7:3d"]),
    "tilted-two-branches": ("tilted", ["t5:6d-input", "t7:3d@0.1,0,0.05"]),
    "tilted-points": ("tilted", ["t5:3d@0.1,0.2,0", "t7:6d", "t3:3d"]),
    # link-to-link (A|B) and joint (JOINT:NAME) rows
    "cassie-loops": ("cassie", "loops"),
    "cassie-loops+2F": ("cassie", "loops+2F"),
    "talos-hands-welded": ("talos", ["left_sole_link:6d", "right_sole_link:6d",
                                     "gripper_left_base_link|gripper_right_base_link:6d"]),
    "go2-foot-to-foot": ("go2", ["FL_foot|RR_foot:3d@0.02,0,0;0,0.01,-0.02", "FR_foot:3d"]),
    "tilted-joint-rows": ("tilted", ["JOINT:tj0", "JOINT:tj2", "JOINT:tj4", "t7|t5:6d", "t3:3d"]),
    # ball joints, MuJoCo's q and v conventions, world-aligned rows
    "ball-chain": ("chain:n=6,ball=2,floating=1", "default"),
    "mjcf-creature": ("mjcf:mjcf_ball_creature.xml", ["toe:3d", "palm:6d", "eye:3d"]),
    "go1-world": ("go1", ["FL_foot:3d-world", "FR_foot:3d-world", "RL_foot:3d", "RR_foot:3d"]),
    "tilted-world": ("tilted", ["t5:3d-world", "t7:3d@0.1,0,0.05"]),       # world and local rows at nv = 13
    # the matrix-free paper's contact scenarios
    "go2-4F3": ("go2", "4F3"),
    "g1-8F3": ("g1", "8F3"),
    "swimmer5": ("swimmer:n=5", "default"),
    "boxes3": ("boxes:n=3", "default"),
    # small trees for the tests of sweeps/ and symbolic/ (tests/sweeps, tests/symbolic): a fixed-base
    # chain, and a floating base with two branches and generic joint axes
    "chain3": ("chain:n=3", ["link3:3d@0.1,0.2,0.3"]),
    "tilted-small": ("tilted", ["t5:3d", "t7:3d@0.1,0,0.05"]),
}
SMALL_TREES = ["chain3", "tilted-small"]
LOOP_CASES = ["cassie-loops", "cassie-loops+2F", "talos-hands-welded", "go2-foot-to-foot", "tilted-joint-rows"]


@functools.lru_cache(maxsize=None)
def case(name):
    """(robot, ConstraintSet) of the case ``name`` (skipped when its robot is not installed)."""
    spec, constraints = CASES[name]
    robot = model_for(spec)
    return robot, ConstraintSet.parse(robot, robot.scenarios[constraints] if isinstance(constraints, str) else constraints)


# -- tolerances scaled by conditioning -------------------------------------------------------------
# Two computations of one quantity that differ only in rounding (another algorithm, CasADi's AD,
# another machine's libm) differ by up to a small multiple of ε·κ, κ the condition number of what
# the problem inverts at that sample; a fixed bound near the measured error fails on a machine that
# rounds differently.  ROUNDING_FACTOR leaves 40× over the worst ratio measured (2.4, pv on
# chain-base) and still fails an error of 1e-6 for every κ below 4.5e7.
EPS = float(np.finfo(float).eps)
ROUNDING_FACTOR = 100


def rounding_tol(kappa, factor=ROUNDING_FACTOR):
    """factor·ε·κ (κ at least 1): the bound for a rounding-level difference at condition number κ."""
    return factor * EPS * max(1.0, float(kappa))


def kappa_kkt(robot, cs, q, K=None, R=None):
    """κ of the dynamics' KKT matrix [[M, Jᵀ], [J, −diag(R)]] (R = 0: hard rows) from the NumPy
    reference at this sample; κ(M) when there are no rows."""
    from casadi_delassus.verify import reference
    M = reference.mass_matrix(robot, q)
    if cs is None or cs.m == 0:
        return float(np.linalg.cond(M))
    J = reference.constraint_jacobian(robot, cs, q, K)
    C = -np.diag(np.broadcast_to(0.0 if R is None else R, cs.m))
    return float(np.linalg.cond(np.block([[M, J.T], [J, C]])))


def evaluate(inputs, outputs, values):
    """The numeric values (arrays) of the SX ``outputs`` at ``values`` of the SX ``inputs``."""
    f = ca.Function("evaluate", list(inputs), [ca.densify(ca.SX(o)) for o in outputs])
    return [np.array(x) for x in f.call(list(values))]


def c_layout(source):
    """(the option names of generated C's one ``enum { OPT_…, N_OPTS };``, in order; those it never reads as
    ``opts[OPT_…]``)."""
    enums = re.findall(r"enum \{ ((?:OPT_\w+, )*)N_OPTS \};", source)
    assert len(enums) == 1, enums
    names = enums[0].split(", ")[:-1]
    unread = [n for n in names if not re.search(rf"\bopts?\[{n}\]", source)]
    return [n.removeprefix("OPT_").lower() for n in names], unread
