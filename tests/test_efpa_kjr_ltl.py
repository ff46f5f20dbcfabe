"""EFPA, KJR and LTL-OSIM against the NumPy reference (the SX Function evaluated
numerically, no compiler), and their operation counts on the papers' Talos model.

Run with ``-s`` to see the maximum relative error of every case."""
import dataclasses
import functools

import numpy as np
import pytest

from conftest import model_for
from casadi_delassus.verify import reference as ref
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import Robot, load_robot

from conftest import ANCHOR_JSON

ALGORITHMS = ["efpa", "kjr", "ltl_osim"]
N_Q = 20

# case name -> (robot, scenario name or constraint specs; None: the mechanism's default)
CASES = {
    "talos-2F": ("talos", "2F"),
    "talos-2F+2H": ("talos", "2F+2H"),
    "talos-2F4x3": ("talos", "2F4x3"),
    "talos-anchor": ("talos", "anchor"),
    "go1-4F3": ("go1", "4F3"),
    "panda-EE6": ("panda", "EE6"),
    "stem": ("stem:n=10,branches=4,length=7", None),
    "kchain": ("kchain:k=5", None),
    "ladder": ("ladder:rungs=4", None),
    "chain-all": ("chain:n=8,all=1", None),
    "chain-floating": ("chain:n=8,floating=1", None),
    # several constraints on one link, and on a link and its ancestor; rotated joint frames
    "chain-shared-links": ("chain:n=8,floating=1,rot=1",
                           ["link3:6d", "link3:3d@0.1,0.2,0.3", "link5:random6", "link8:3d-input", "link3:random3"]),
    "talos-arm-shared": ("talos", ["arm_left_7_link:6d", "gripper_left_base_link:3d@0.1,0,0",
                                   "arm_left_4_link:random6", "arm_left_7_link:6d-input"]),
    # a prismatic joint (finger) and rotated joint frames on the constraint paths
    "panda-finger": ("panda", ["panda_hand_tcp:6d", "panda_leftfinger:3d-input", "panda_rightfinger:3d@0,0.01,0.02"]),
    # 'continuous' joints ((cos, sin) in q) under a free base
    "kinova": ("erd:kinova_description/robots/kinova.urdf", ["j2s6s200_link_6:6d-input", "j2s6s200_link_3:3d@0.1,0,0"]),
    # two trees (a floating chain and a fixed one): constraints on different trees decouple
    "forest": ("forest", ["a_link4:6d-input", "b_link3:6d", "a_link2:3d"]),
}


def _forest():
    trees = [(prefix, load_robot(spec)) for prefix, spec in (("a_", "chain:n=4,floating=1"), ("b_", "chain:n=3"))]
    bodies, offset = [], 0
    for prefix, tree in trees:
        for b in tree.bodies:
            bodies.append(dataclasses.replace(
                b, name=prefix + b.name, parent=b.parent + offset if b.parent >= 0 else -1,
                joint=dataclasses.replace(b.joint, name=prefix + b.joint.name)))
        offset += tree.n_bodies
    return Robot("forest", bodies)


def _model(spec):
    return model_for(spec, {"forest": _forest})


@functools.lru_cache(maxsize=None)
def case(name):
    """(robot, constraints, [(q, K inputs, reference Λ⁻¹)] for N_Q seeded configurations)."""
    spec, scenario = CASES[name]
    robot = _model(spec)
    specs = scenario if isinstance(scenario, list) else robot.scenarios[scenario or "default"]
    cs = ConstraintSet.parse(robot, specs)
    rng = np.random.default_rng(7)
    samples = []
    for _ in range(N_Q):
        q, K = robot.random_q(rng), cs.random_inputs(rng)
        samples.append((q, K, ref.delassus(robot, cs, q, K)))
    return robot, cs, samples


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("name", list(CASES))
def test_agrees_with_reference(name, algorithm):
    robot, cs, samples = case(name)
    f, _, _ = trace(robot, cs, algorithm)
    err = 0.0
    for q, K, D_ref in samples:
        D = np.array(f(q, *[K[c.input_name] for c in cs.inputs]))
        err = max(err, np.abs(D - D_ref).max() / np.abs(D_ref).max())
    print(f"{algorithm:9s} {name:20s} m={cs.m:3d} max rel err {err:.2e}")
    assert err <= 1e-9


# The papers' implementation on the same model and constraints (../shared/anchors/README.md);
# ours must need at most 0.8x as many instructions.
ANCHOR_COUNTS = {"efpa": 24907, "ltl_osim": 33112, "kjr": 42207}
ANCHOR_SPECS = ["leg_left_6_link:6d-input", "leg_right_6_link:6d-input",
                "gripper_left_motor_double_link:6d-input", "gripper_right_motor_single_link:6d-input"]


@pytest.mark.skipif(not ANCHOR_JSON.is_file(), reason="anchor JSON not available")
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_anchor_operation_count(algorithm):
    robot = load_robot(str(ANCHOR_JSON))
    cs = ConstraintSet.parse(robot, ANCHOR_SPECS)
    n = count_ops(trace(robot, cs, algorithm)[0])["instructions"]
    print(f"{algorithm}: {n} instructions, anchor {ANCHOR_COUNTS[algorithm]} ({n / ANCHOR_COUNTS[algorithm]:.3f}x)")
    assert n <= 0.8 * ANCHOR_COUNTS[algorithm]
