"""mujoco_model/collision.py against MuJoCo's own collision detection (``data.contact`` after
mj_forward, MuJoCo 4.0.0): for every geom kind against tilted and offset planes with margins
and gaps, for sphere and capsule pairs between bodies (near-parallel capsules too), and for
Gymnasium's and robosuite-models' robots dropped onto their floors, the contacts we select are
MuJoCo's (same geom pairs, same count, same order) with equal positions, frames, distances and
parameters.  Candidates come from MuJoCo's geom poses (the NumPy path) or from q through our
kinematics (the SX function)."""
import numpy as np
import pytest

from casadi_delassus.model.mjcf import robot_from_mjmodel
from casadi_delassus.mujoco_model import collision as C

from .mj_scenes import agreement, check, drop_each, dropped_states, model, mujoco, random_qpos

# a hexagonal prism (hexagon faces: the largest-quadrilateral pruning), a tetrahedron and a
# cloud of 40 points on an ellipsoid (a hull of triangles)
HEX = " ".join(f"{0.1 * np.cos(a):.6f} {0.1 * np.sin(a):.6f} {z}" for z in (-0.05, 0.05) for a in np.arange(6) * np.pi / 3)
TET = "0.1 0 -0.05  -0.05 0.09 -0.05  -0.05 -0.09 -0.05  0 0 0.12"
CLOUD = " ".join(f"{x:.6f}" for x in (lambda p: (p / np.linalg.norm(p, axis=1)[:, None] * [0.12, 0.08, 0.05]).ravel())(
    np.random.default_rng(7).normal(size=(40, 3))))
SHAPES = {"sphere": ['size="0.1"', 'size="0.05"'], "capsule": ['size="0.05 0.2"', 'size="0.08 0.05"'],
          "box": ['size="0.1 0.2 0.15"', 'size="0.02 0.05 0.3"'], "cylinder": ['size="0.1 0.2"', 'size="0.15 0.02"'],
          "ellipsoid": ['size="0.1 0.2 0.05"', 'size="0.03 0.03 0.08"'],
          "mesh": ['mesh="hex"', 'mesh="tet"', 'mesh="cloud"']}
# floors: tilted with |n_y| < 0.5 (the frame's tangent from the world y axis) and ≥ 0.5 (from z)
FLOORS = {"tilted": 'zaxis="0.2 -0.3 1" pos="0.1 -0.2 0.05"', "steep": 'zaxis="0.3 0.9 1" pos="-0.3 0.2 -0.1"',
          "level": 'pos="0 0 -0.1"'}


def floor_scene(kind, floor):
    """A floor and a few free bodies with one ``kind`` geom each (sizes, margins, gaps,
    priorities, friction and solver parameters varied), touching the floor only."""
    params = ['margin="0.005"', 'margin="0.02" gap="0.004" condim="4" priority="1" friction="0.7 0.02 0.003"',
              'margin="0.01" solref="0.03 0.9" solimp="0.8 0.9 0.002 0.4 3" solmix="3" condim="6"']
    bodies = "".join(f'<body name="b{i}"><freejoint/><geom name="g{i}" type="{kind}" {shape} {params[i]} '
                     f'contype="1" conaffinity="0"/></body>' for i, shape in enumerate(SHAPES[kind]))
    return mujoco.MjModel.from_xml_string(f"""<mujoco><option gravity="0 0 0"/>
      <asset><mesh name="hex" vertex="{HEX}"/><mesh name="tet" vertex="{TET}"/><mesh name="cloud" vertex="{CLOUD}"/></asset>
      <worldbody><geom name="floor" type="plane" size="0 0 1" {FLOORS[floor]} margin="0.01" gap="0.003"
        friction="0.9 0.01 0.001" solref="0.02 1.1"/>{bodies}</worldbody></mujoco>""")


@pytest.mark.parametrize("floor", FLOORS)
@pytest.mark.parametrize("kind", SHAPES)
def test_each_geom_against_a_plane_is_mujocos(kind, floor):
    m = floor_scene(kind, floor)
    layout = C.contact_layout(m)
    rng = np.random.default_rng(11)
    Q = drop_each(m, layout, random_qpos(m, 300, rng), rng)
    check(agreement(m, layout, Q))


def test_meshes_resting_flat_are_mujocos():
    """Meshes upright or turned half a turn about a world axis on a level floor (their rotation matrices exact): the
    vertices of a face resting on the floor tie for lowest, and which one MuJoCo takes, the first in its hull graph's
    order, decides the corners it keeps.  (The first lowest by vertex id, the rule before, kept other corners of the
    prism's hexagon in every such state.)"""
    m = floor_scene("mesh", "level")
    layout = C.contact_layout(m)
    rng = np.random.default_rng(12)
    Q = random_qpos(m, 120, rng)
    turns = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    for b in range(3):
        Q[:, 7 * b + 3:7 * b + 7] = turns[rng.integers(0, 4, len(Q))]
    result = agreement(m, layout, drop_each(m, layout, Q, rng))
    check(result)
    assert result.contacts > 600, result


PAIRS = """<mujoco><option gravity="0 0 0"/><worldbody>
  <body name="a"><freejoint/><geom name="a" type="capsule" size="0.05 0.2" margin="0.01" gap="0.002"/></body>
  <body name="b"><freejoint/><geom name="b" type="capsule" size="0.07 0.1" margin="0.005"/></body>
  <body name="s"><freejoint/><geom name="s" type="sphere" size="0.06"/></body>
  <body name="t"><freejoint/><geom name="t" type="sphere" size="0.04" priority="2" friction="0.3 0.1 0.1"
    solref="0.05 0.8"/></body></worldbody></mujoco>"""


def _turning_z_to(axis):
    """The unit quaternion (w, x, y, z) that turns z onto ``axis``."""
    axis = axis / np.linalg.norm(axis)
    v = np.cross([0, 0, 1.0], axis)
    s = np.linalg.norm(v)
    if s < 1e-15:
        return np.array([1.0, 0, 0, 0]) if axis[2] > 0 else np.array([0, 1.0, 0, 0])
    angle = np.arctan2(s, axis[2])
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * v / s]


def body_pair_states(n, rng):
    """Four free bodies within 12 cm of each other in any orientation; in every other state the
    two capsules are parallel (either way round) to within 1e-7 … 1e-2 rad."""
    Q = np.zeros((n, 28))
    for k in range(n):
        base = rng.normal(size=3)
        for b in range(4):
            axis = rng.normal(size=3)
            if b < 2 and k % 2 == 0:
                tilt = np.cross(base, rng.normal(size=3))
                axis = base / np.linalg.norm(base) + 10 ** rng.uniform(-7, -2) * tilt / np.linalg.norm(tilt)
                axis = -axis if b == 1 and k % 4 == 0 else axis
            Q[k, 7 * b:7 * b + 3] = rng.uniform(-0.12, 0.12, 3)
            Q[k, 7 * b + 3:7 * b + 7] = _turning_z_to(axis)
    return Q


def test_sphere_and_capsule_pairs_between_bodies_are_mujocos():
    """Parallel capsules give MuJoCo 4.0.0's two contacts at the ends of the axes' overlap (the
    rule of the sources read, the first two of four end tests, puts them elsewhere in these
    states); frames to 1e-12: a normal between nearly coincident points carries the points'
    rounding over their distance."""
    m = mujoco.MjModel.from_xml_string(PAIRS)
    layout = C.contact_layout(m)
    assert [ps.pair.kind for ps in layout.pairs] == ["capsule-capsule"] + ["sphere-capsule"] * 4 + ["sphere-sphere"]
    result = agreement(m, layout, body_pair_states(600, np.random.default_rng(3)))
    check(result)
    assert result.contacts > 1000


@pytest.mark.parametrize("kind", ["box", "mesh", "capsule"])
def test_the_sx_candidates_from_q_are_mujocos(kind):
    """The SX function q → candidates (our kinematics, the geoms' placements on the Robot) gives
    MuJoCo's contacts too."""
    m = floor_scene(kind, "tilted")
    layout = C.contact_layout(m)
    f = C.candidates_function(m, robot_from_mjmodel(m, "scene"), layout)
    rng = np.random.default_rng(5)
    Q = drop_each(m, layout, random_qpos(m, 60, rng), rng)
    check(agreement(m, layout, Q, C.expand(layout, C.candidates_at(f, Q))))


def _robot_agreement(name, n, sx):
    m = model(name)
    layout = C.contact_layout(m, name)
    Q = dropped_states(m, layout, n, np.random.default_rng(2))
    if not sx:
        return agreement(m, layout, Q)
    f = C.candidates_function(m, robot_from_mjmodel(m, name), layout)
    return agreement(m, layout, Q, C.expand(layout, C.candidates_at(f, Q)))


@pytest.mark.parametrize("sx", [False, True], ids=["numpy", "sx"])
def test_hopper_dropped_on_its_floor_is_mujocos(sx):
    """Hopper: capsules on the floor and capsule pairs between its bodies."""
    check(_robot_agreement("hopper", 60, sx))


@pytest.mark.slow
@pytest.mark.parametrize("sx", [False, True], ids=["numpy", "sx"])
@pytest.mark.parametrize("name", ["ant", "hopper", "walker2d_v5", "humanoid", "go2", "g1", "h1"])
def test_robots_dropped_on_their_floors_are_mujocos(name, sx):
    """300 random states per robot, every field to 1e-12 (frames of humanoid's sphere and capsule
    pairs between bodies come nearest: normals between close points); ``-s`` prints the numbers."""
    result = _robot_agreement(name, 300, sx)
    print(f"\n{name} ({'SX from q' if sx else 'from MuJoCo poses'}): {result}")
    check(result)


def test_select_keeps_mujocos_caps_and_gates():
    """The rule on hand-made arrays: a box keeps the first 4 corners within reach that are not
    above its centre; parallel capsules the ends of the overlap, skew ones the nearest points."""
    m = floor_scene("box", "tilted")
    layout = C.contact_layout(m)
    box = layout.pairs[0]
    dist, gate = np.full(layout.nslot, 1.0), np.ones(layout.nslot)
    dist[box.start:box.stop] = [-1, -1, 0.5, -1, -1, -1, -1, -1]
    gate[box.start:box.stop] = [1, -1, -1, -1, -1, -1, -1, -1]
    pos, frame = np.zeros((layout.nslot, 3)), np.zeros((layout.nslot, 9))
    assert C.select(layout, dist, pos, frame, gate, np.zeros(layout.naux)) == [box.start + k for k in (1, 3, 4, 5)]
    m = mujoco.MjModel.from_xml_string(PAIRS)
    layout = C.contact_layout(m)
    caps = layout.pairs[0]
    dist, gate = np.full(layout.nslot, -1.0), -np.ones(layout.nslot)
    pos, frame = np.zeros((layout.nslot, 3)), np.zeros((layout.nslot, 9))
    chosen = [[s for s in C.select(layout, dist, pos, frame, gate, np.r_[aux, np.zeros(layout.naux - 3)])
               if s < caps.stop] for aux in ([1, 0, 0], [-1, 0.5, -2], [-1, -0.5, 0.2], [-1, 3, 2])]
    assert chosen == [[caps.start], [caps.start + 2, caps.start + 3], [caps.start + 3, caps.start + 4],
                      [caps.start + 4, caps.start + 1]]


def test_make_frame_is_mujocos_rule():
    """mju_makeFrame: the normal, then the y axis (z when |n_y| ≥ 0.5) or the given tangent
    made orthogonal, then their cross product: orthonormal and right-handed."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = rng.normal(size=3)
        n /= np.linalg.norm(n)
        tangent = rng.normal(size=3)
        for t in (None, list(tangent / np.linalg.norm(tangent))):
            F = np.array(C.make_frame(list(n), t), float).reshape(3, 3)
            np.testing.assert_allclose(F @ F.T, np.eye(3), atol=1e-14)
            assert np.linalg.det(F) > 0 and np.allclose(F[0], n)
            if t is None:
                axis = np.eye(3)[1 if abs(n[1]) < 0.5 else 2]
                assert F[1] @ axis > 0 and abs(F[2] @ axis) < 1e-14
            else:
                assert F[1] @ t > 0 and abs(F[2] @ t) < 1e-14
