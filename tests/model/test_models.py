"""Model loaders: the spatial_v2 JSON anchor, malformed JSON, synthetic mechanisms (kinematic
and the matrix-free paper's contact scenarios), the SDF reader and Cassie's loops."""
import json

import numpy as np
import pytest

from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ModelError
from casadi_delassus.model.spatial_v2 import (load_spatial_v2_json, plucker,
                                              robot_from_spatial_v2, to_spatial_v2)
from casadi_delassus.model.synthetic import MECHANISMS, is_synthetic, parse_synthetic

from casadi_delassus.model import load_robot
from casadi_delassus.model.sdf import load_sdf
from casadi_delassus.verify import pinocchio_oracle as oracle
from conftest import ANCHOR_JSON as ANCHOR
from conftest import model_for

try:
    import pinocchio as pin
except ImportError:
    pin = None
needs_pinocchio = pytest.mark.skipif(pin is None, reason="pinocchio is not installed")
needs_anchor = pytest.mark.skipif(not ANCHOR.is_file(), reason="anchor JSON not available")


# -- helpers written independently of the loader ---------------------------------------------

def _skew(v):
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]], float)


def _xtree(E, r):
    return np.block([[E, np.zeros((3, 3))], [-E @ _skew(r), E]])


def _mcI(m, c, Ic):
    C = _skew(c)
    return np.block([[Ic + m * C @ C.T, m * C], [m * C.T, m * np.eye(3)]])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, s, 0], [-s, c, 0], [0, 0, 1.0]])


def _small_model():
    """Three bodies: a floating base (empty jtype) and two revolute links."""
    Ic = np.array([[0.02, 0.001, 0.0], [0.001, 0.03, 0.002], [0.0, 0.002, 0.025]])
    return {
        "NB": 3,
        "parent": [0, 1, 2],
        "jtype": ["", "Rx", "Py"],
        "Xtree": [_xtree(np.eye(3), [0, 0, 0]).tolist(),
                  _xtree(_rz(0.3), [0.1, 0.2, 0.3]).tolist(),
                  _xtree(np.eye(3), [0.0, 0.0, 0.4]).tolist()],
        "I": [_mcI(2.0, [0.01, 0.0, 0.05], Ic).tolist(),
              _mcI(1.0, [0.0, 0.1, 0.0], Ic).tolist(),
              _mcI(0.5, [0.02, 0.0, 0.1], Ic).tolist()],
        "bodyNames": ["base", "upper", "lower"],
    }


def _write(tmp_path, data, text=None):
    p = tmp_path / "model.json"
    p.write_text(text if text is not None else json.dumps(data))
    return p


# -- the anchor ------------------------------------------------------------------------------

@needs_anchor
def test_anchor_loads():
    data = json.loads(ANCHOR.read_text())
    robot = load_spatial_v2_json(ANCHOR)
    assert robot.n_bodies == 45
    assert robot.nv == 50 and robot.nq == 51
    assert robot.floating_base
    assert robot.bodies[0].joint.kind == "free" and robot.bodies[0].joint.name == "root_joint"
    assert [b.name for b in robot.bodies] == data["bodyNames"]
    assert sum(b.joint.kind == "revolute" for b in robot.bodies) == 44
    assert [b.parent + 1 for b in robot.bodies] == data["parent"]
    assert robot.name == "talos_spatial_v2_model"
    # 'R' is about z
    k = data["jtype"].index("R")
    assert np.array_equal(robot.bodies[k].joint.axis, [0.0, 0.0, 1.0])
    for name in ("leg_left_6_link", "leg_right_6_link", "gripper_left_motor_double_link",
                 "gripper_right_motor_single_link"):
        robot.frame(name)


@needs_anchor
def test_anchor_round_trip():
    data = json.loads(ANCHOR.read_text())
    robot = load_spatial_v2_json(ANCHOR)
    for i, b in enumerate(robot.bodies):
        X = np.array(data["Xtree"][i])
        I = np.array(data["I"][i])
        assert np.abs(plucker(b.rotation, b.translation) - X).max() < 1e-12, b.name
        assert np.abs(_xtree(b.rotation, b.translation) - X).max() < 1e-12, b.name
        assert np.abs(b.spatial_inertia() - I).max() < 1e-12, b.name
        assert np.abs(_mcI(b.mass, b.com, b.inertia) - I).max() < 1e-12, b.name
    back = to_spatial_v2(robot)
    assert np.abs(np.array(back["Xtree"]) - np.array(data["Xtree"])).max() < 1e-12
    assert np.abs(np.array(back["I"]) - np.array(data["I"])).max() < 1e-12
    assert back["parent"] == data["parent"]


# -- small valid files -----------------------------------------------------------------------

def test_small_model_values(tmp_path):
    data = _small_model()
    robot = load_spatial_v2_json(_write(tmp_path, data), name="small")
    assert robot.name == "small" and robot.nv == 8 and robot.nq == 9
    upper = robot.bodies[1]
    assert upper.joint.name == "upper_joint" and upper.joint.kind == "revolute"
    assert np.allclose(upper.rotation, _rz(0.3)) and np.allclose(upper.translation, [0.1, 0.2, 0.3])
    assert np.isclose(upper.mass, 1.0) and np.allclose(upper.com, [0, 0.1, 0])
    lower = robot.bodies[2]
    assert lower.joint.kind == "prismatic" and np.array_equal(lower.joint.axis, [0, 1.0, 0])
    Ic = np.array([[0.02, 0.001, 0.0], [0.001, 0.03, 0.002], [0.0, 0.002, 0.025]])
    assert np.allclose(lower.inertia, Ic) and np.isclose(lower.mass, 0.5)
    assert np.allclose(lower.com, [0.02, 0.0, 0.1])


def test_fixed_base_and_default_names(tmp_path):
    data = _small_model()
    data["jtype"][0] = "Rz"
    del data["bodyNames"]
    robot = load_spatial_v2_json(_write(tmp_path, data))
    assert not robot.floating_base and robot.nv == 3
    assert [b.name for b in robot.bodies] == ["body1", "body2", "body3"]
    assert robot.bodies[0].joint.name == "body1_joint"


def test_floating_base_key(tmp_path):
    data = _small_model()
    data["jtype"][0] = "Rx"          # ignored
    data["floating_base"] = True
    robot = load_spatial_v2_json(_write(tmp_path, data))
    assert robot.floating_base and robot.nv == 8
    data["floating_base"] = False
    data["jtype"][0] = "Rx"
    assert not load_spatial_v2_json(_write(tmp_path, data)).floating_base


def test_reordered_parent_before_child(tmp_path):
    data = _small_model()
    # file order: base, lower (child of upper), upper (child of base)
    for key in ("jtype", "Xtree", "I", "bodyNames"):
        data[key] = [data[key][0], data[key][2], data[key][1]]
    data["parent"] = [0, 3, 1]
    robot = load_spatial_v2_json(_write(tmp_path, data))
    assert [b.name for b in robot.bodies] == ["base", "upper", "lower"]
    assert [b.parent for b in robot.bodies] == [-1, 0, 1]
    assert robot.bodies[2].joint.kind == "prismatic"


def test_dict_entry_point():
    robot = robot_from_spatial_v2(_small_model(), name="d")
    assert robot.n_bodies == 3


# -- malformed files -------------------------------------------------------------------------

def _mutate(**changes):
    data = _small_model()
    for k, v in changes.items():
        if v is _DELETE:
            del data[k]
        else:
            data[k] = v
    return data


_DELETE = object()
_IC = np.diag([0.02, 0.03, 0.025])
_BAD_X = _xtree(np.eye(3), [0.1, 0, 0])
_BAD_X[0, 4] = 0.5                                          # upper-right block not zero
_NOT_ROT = _xtree(np.diag([1.0, 2.0, 1.0]), [0, 0, 0])      # E not a rotation
_REFLECT = _xtree(np.diag([1.0, 1.0, -1.0]), [0, 0, 0])     # improper rotation
_BAD_LL = _xtree(np.eye(3), [0, 0, 0])
_BAD_LL[3:, :3] = np.eye(3)                                 # lower-left not -E r~
_ASYM_I = _mcI(1.0, [0, 0, 0], _IC)
_ASYM_I[0, 1] = 0.01
_BAD_MASS_I = _mcI(1.0, [0, 0, 0], _IC)
_BAD_MASS_I[3, 3] = 2.0
_NEG_MASS_I = _mcI(1.0, [0, 0, 0], _IC) * -1
_NOT_PD_I = _mcI(1.0, [0.1, 0, 0], np.diag([0.02, -0.03, 0.025]))
_BAD_OFF_I = _mcI(1.0, [0, 0, 0], _IC)
_BAD_OFF_I[0, 4] = _BAD_OFF_I[4, 0] = 0.3                   # m c~ not skew


def _replace(key, index, value):
    data = _small_model()
    data[key][index] = value.tolist() if isinstance(value, np.ndarray) else value
    return data


MALFORMED = [
    ("not a dict", [1, 2, 3], "JSON object"),
    ("missing NB", _mutate(NB=_DELETE), "missing key 'NB'"),
    ("missing parent", _mutate(parent=_DELETE), "missing key 'parent'"),
    ("missing jtype", _mutate(jtype=_DELETE), "missing key 'jtype'"),
    ("missing Xtree", _mutate(Xtree=_DELETE), "missing key 'Xtree'"),
    ("missing I", _mutate(I=_DELETE), "missing key 'I'"),
    ("NB not int", _mutate(NB="three"), "NB must be an integer"),
    ("NB bool", _mutate(NB=True), "NB must be an integer"),
    ("NB zero", _mutate(NB=0), "at least 1 body"),
    ("parent short", _mutate(parent=[0, 1]), "'parent' has 2 entries, NB = 3"),
    ("parent not list", _mutate(parent=5), "'parent' must be a list"),
    ("parent not int", _mutate(parent=[0, 1, "x"]), "parent of body 'lower' must be an integer"),
    ("parent range", _mutate(parent=[0, 1, 7]), "parent of body 'lower' is 7, out of range"),
    ("parent negative", _mutate(parent=[0, -1, 1]), "out of range"),
    ("parent self", _mutate(parent=[0, 2, 1]), "'upper' is its own parent"),
    ("parent cycle", _mutate(parent=[0, 3, 2]), "cyclic parent structure through bodies"),
    ("jtype short", _mutate(jtype=["", "Rx"]), "'jtype' has 2 entries"),
    ("bad jtype", _replace("jtype", 1, "Q"), "bad jtype 'Q' for body 'upper'"),
    ("empty jtype", _replace("jtype", 2, ""), "bad jtype '' for body 'lower'"),
    ("numeric jtype", _replace("jtype", 2, 3), "bad jtype 3 for body 'lower'"),
    ("floating_base type", _mutate(floating_base="yes"), "'floating_base' must be true or false"),
    ("floating not root", _mutate(parent=[2, 0, 2]), "floating base body 'base' must have parent 0"),
    ("names short", _mutate(bodyNames=["a", "b"]), "'bodyNames' has 2 entries"),
    ("names dup", _mutate(bodyNames=["a", "b", "a"]), "duplicate body name 'a'"),
    ("names type", _mutate(bodyNames=["a", 2, "c"]), "bodyNames entry 2"),
    ("Xtree count", _mutate(Xtree=_small_model()["Xtree"][:2]), "'Xtree' has 2 entries"),
    ("Xtree shape", _replace("Xtree", 1, np.eye(5)), r"Xtree of body 'upper' must be a 6x6 numeric matrix, got shape \(5, 5\)"),
    ("Xtree ragged", _replace("Xtree", 1, [[1, 2], [3]]), "Xtree of body 'upper' must be a 6x6"),
    ("Xtree text", _replace("Xtree", 1, "eye(6)"), "Xtree of body 'upper' must be a 6x6"),
    ("Xtree null", _replace("Xtree", 1, [[None] * 6] * 6), "Xtree of body 'upper' has a non-finite"),
    ("Xtree upper-right", _replace("Xtree", 1, _BAD_X), "Xtree of body 'upper' is not a Plücker transform: its upper-right"),
    ("Xtree not rotation", _replace("Xtree", 2, _NOT_ROT), "Xtree of body 'lower' is not a Plücker transform: its rotation"),
    ("Xtree reflection", _replace("Xtree", 2, _REFLECT), "not a proper rotation"),
    ("Xtree lower-left", _replace("Xtree", 2, _BAD_LL), "not a Plücker transform: its lower-left"),
    ("I shape", _replace("I", 1, np.eye(3)), "I of body 'upper' must be a 6x6"),
    ("I asym", _replace("I", 1, _ASYM_I), "I of body 'upper' is not a rigid-body spatial inertia: it is not symmetric"),
    ("I mass block", _replace("I", 1, _BAD_MASS_I), "I of body 'upper' is not a rigid-body spatial inertia: its lower-right"),
    ("I neg mass", _replace("I", 2, _NEG_MASS_I), "I of body 'lower' is not a rigid-body spatial inertia: its mass"),
    ("I not PD", _replace("I", 2, _NOT_PD_I), "I of body 'lower' is not a rigid-body .* not positive semi-definite"),
    ("I off block", _replace("I", 0, _BAD_OFF_I), "I of body 'base' is not a rigid-body .*not skew-symmetric"),
    ("gravity", _mutate(gravity=[0, 0]), "'gravity' must be a 3-vector"),
]


@pytest.mark.parametrize("data,match", [(d, m) for _, d, m in MALFORMED],
                         ids=[i for i, _, _ in MALFORMED])
def test_malformed_json_model(tmp_path, data, match):
    with pytest.raises(ModelError, match=match) as err:
        load_spatial_v2_json(_write(tmp_path, data))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("text,match", [
    ("{not json", "invalid JSON in spatial_v2 model .*line 1"),
    ("", "invalid JSON"),
    ('{"NB": 1, "parent": [0], ', "invalid JSON"),
])
def test_invalid_json_text(tmp_path, text, match):
    with pytest.raises(ModelError, match=match):
        load_spatial_v2_json(_write(tmp_path, None, text=text))


def test_nan_in_inertia(tmp_path):
    text = json.dumps(_small_model()).replace("0.5", "NaN", 1)
    with pytest.raises(ModelError, match="non-finite"):
        load_spatial_v2_json(_write(tmp_path, None, text=text))


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="model file not found"):
        load_spatial_v2_json(tmp_path / "nope.json")


def test_binary_file(tmp_path):
    p = tmp_path / "model.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelError):
        load_spatial_v2_json(p)


# -- synthetic mechanisms --------------------------------------------------------------------

# spec -> (bodies, nv, constraint rows, floating base)
SYNTHETIC = {
    "chain:n=20": (20, 20, 6, False),
    "chain:n=1": (1, 1, 6, False),
    "chain:n=20,floating=1": (20, 25, 6, True),
    "chain:n=12,all=1": (12, 12, 72, False),
    "chain:n=4,all=1,floating=1": (4, 9, 24, True),
    "stem:n=10,branches=4,length=7": (10 + 56, 9 + 6 + 56, 48, True),
    "stem:n=10,branches=4": (66, 71, 48, True),
    "stem:n=3,branches=1": (17, 22, 12, True),
    "stem:n=1,branches=2,length=1": (5, 10, 24, True),
    "stem:n=5,branches=2,length=3,floating=0": (17, 17, 24, False),
    "kchain:k=5": (25, 25, 30, False),
    "kchain:k=1": (1, 1, 6, False),
    "kchain:k=3,floating=1": (9, 14, 18, True),
    "ladder:rungs=4": (40, 40, 24, False),
    "ladder:rungs=1": (10, 10, 6, False),
    "ladder:rungs=3,length=2,segment=1,floating=1": (9, 14, 18, True),
    "ladder:rungs=2,rot=1": (20, 20, 12, False),
    " Chain : n = 3 ": (3, 3, 6, False),
    "chain:n=5,ball=1": (5, 15, 6, False),              # ball joints at the root, in the middle, at the tip
    "chain:n=6,ball=2,floating=1": (6, 17, 6, True),
    "ragdoll": (15, 40, 12, True),
    "ragdoll:floating=0": (15, 37, 12, False),
}


@pytest.mark.parametrize("spec", list(SYNTHETIC))
def test_synthetic_builds(spec):
    n_bodies, nv, rows, floating = SYNTHETIC[spec]
    robot, constraints = parse_synthetic(spec)
    assert robot.n_bodies == n_bodies
    assert robot.nv == nv
    assert robot.floating_base == floating
    cs = ConstraintSet.parse(robot, constraints)
    assert cs.m == rows
    assert all(c.endswith(":6d") for c in constraints)
    assert is_synthetic(spec)
    for i, b in enumerate(robot.bodies):       # parent before child
        assert b.parent < i


def test_synthetic_structure():
    robot, cons = parse_synthetic("kchain:k=4")
    assert cons == ["link4:6d", "link8:6d", "link12:6d", "link16:6d"]
    assert [b.parent for b in robot.bodies] == list(range(-1, 15))

    robot, cons = parse_synthetic("stem:n=4,branches=2,length=3")
    names = [b.name for b in robot.bodies]
    assert names[0] == "stem1" and robot.bodies[0].joint.kind == "free"
    idx = {n: i for i, n in enumerate(names)}
    for j in (1, 2):
        assert robot.bodies[idx[f"b{j}_left_1"]].parent == idx["stem1"]
        assert robot.bodies[idx[f"b{j}_right_1"]].parent == idx["stem4"]
        assert robot.bodies[idx[f"b{j}_left_3"]].parent == idx[f"b{j}_left_2"]
    assert cons == ["b1_left_3:6d", "b2_left_3:6d", "b1_right_3:6d", "b2_right_3:6d"]

    robot, cons = parse_synthetic("ladder:rungs=3")
    idx = {b.name: i for i, b in enumerate(robot.bodies)}
    assert robot.bodies[idx["rail1"]].parent == -1
    for j in (1, 2, 3):
        assert robot.bodies[idx[f"rung{j}_1"]].parent == idx[f"rail{3 * j}"]
    assert robot.bodies[idx["rail4"]].parent == idx["rail3"]
    assert cons == ["rung1_7:6d", "rung2_7:6d", "rung3_7:6d"]

    _, cons = parse_synthetic("chain:n=3,all=1")
    assert cons == ["link1:6d", "link2:6d", "link3:6d"]


def test_synthetic_geometry_is_non_degenerate_and_reproducible():
    robot, _ = parse_synthetic("chain:n=6")
    axes = {tuple(b.joint.axis) for b in robot.bodies}
    assert axes == {(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)}
    for b in robot.bodies:
        assert np.all(b.translation != 0) and np.all(b.com != 0)
        off = b.inertia[~np.eye(3, dtype=bool)]
        assert np.all(off != 0)                      # full inertia
        assert 0.1 < b.mass < 5
        assert 0.05 < np.linalg.norm(b.translation) < 0.6
    again, _ = parse_synthetic("chain:n=6")
    assert again.fingerprint() == robot.fingerprint()
    longer, _ = parse_synthetic("chain:n=9")     # a link is the same in a longer chain
    for a, b in zip(robot.bodies, longer.bodies):
        assert np.array_equal(a.inertia, b.inertia) and np.array_equal(a.translation, b.translation)
    rotated, _ = parse_synthetic("chain:n=6,rot=1")
    for b in rotated.bodies:
        assert np.allclose(b.rotation @ b.rotation.T, np.eye(3)) and np.isclose(np.linalg.det(b.rotation), 1)
        assert not np.allclose(b.rotation, np.eye(3))


def test_synthetic_physics_sanity():
    """Independent of our code paths: masses positive, inertias symmetric, PD and
    physically realisable (triangle inequality on the principal moments)."""
    for spec in ("chain:n=5", "stem:n=2,branches=1,length=2", "ladder:rungs=1"):
        robot, _ = parse_synthetic(spec)
        for b in robot.bodies:
            assert b.mass > 0
            assert np.array_equal(b.inertia, b.inertia.T)
            ev = np.linalg.eigvalsh(b.inertia)
            assert ev.min() > 0
            assert ev[0] + ev[1] >= ev[2]
            S = b.spatial_inertia()
            assert np.allclose(S, S.T) and np.linalg.eigvalsh(S).min() > 0


def test_synthetic_spatial_v2_round_trip(tmp_path):
    robot, _ = parse_synthetic("ladder:rungs=2,floating=1,rot=1")
    p = tmp_path / "ladder.json"
    p.write_text(json.dumps(to_spatial_v2(robot)))
    back = load_spatial_v2_json(p, name=robot.name)
    assert back.describe() == robot.describe()


@pytest.mark.parametrize("spec,match", [
    ("chian:n=3", "unknown synthetic mechanism 'chian'; did you mean 'chain'"),
    ("tree:n=3", "unknown synthetic mechanism 'tree'"),
    ("chain", "missing parameter 'n'"),
    ("chain:", "missing parameter 'n'"),
    ("stem:n=3", "missing parameter 'branches'"),
    ("kchain:n=3", "unknown parameter 'n' for kchain"),
    ("chain:n=3,m=4", "unknown parameter 'm' for chain"),
    ("chain:n=2.5", "n must be an integer, got '2.5'"),
    ("chain:n=abc", "n must be an integer"),
    ("chain:n=", "n must be an integer"),
    ("chain:n=0", "n must be >= 1, got 0"),
    ("chain:n=-3", "n must be >= 1"),
    ("stem:n=3,branches=0", "branches must be >= 1"),
    ("ladder:rungs=2,length=0", "length must be >= 1"),
    ("kchain:k=0", "k must be >= 1"),
    ("chain:n=3,floating=2", "floating must be 0 or 1"),
    ("chain:n=3,all=-1", "all must be 0 or 1"),
    ("chain:n=3,n=4", "parameter 'n' given twice"),
    ("chain:n=3,ball=-1", "ball must be >= 0, got -1"),
    ("ragdoll:n=3", "unknown parameter 'n' for ragdoll"),
    ("chain:n=3,,", "expected key=value"),
    ("chain:n", "expected key=value"),
    ("kchain:k=1000", "bodies, more than"),
])
def test_bad_synthetic_spec(spec, match):
    with pytest.raises(ModelError, match=match) as err:
        parse_synthetic(spec)
    assert "\n" not in str(err.value)


def test_bad_synthetic_non_string():
    with pytest.raises(ModelError, match="expected a string"):
        parse_synthetic(None)


def test_is_synthetic():
    for spec in ("chain:n=3", "stem:n=1,branches=1", "kchain", "LADDER:rungs=2", "chian:n=3"):
        assert is_synthetic(spec), spec
    for spec in ("talos", "robots/talos.urdf", "/tmp/x.json", "", None, 3, "C:/models/x.urdf"):
        assert not is_synthetic(spec), spec
    assert set(MECHANISMS) == {"chain", "stem", "kchain", "ladder", "ragdoll"}


_JUNK = [None, "x", 3, -1, 2.5, True, [], {}, [[1, 2]], [None, None, None], ["", "", ""],
         [[[0.0] * 6] * 6] * 3, [3, 2, 1]]


@pytest.mark.parametrize("key", ["NB", "parent", "jtype", "Xtree", "I", "bodyNames",
                                 "floating_base", "gravity"])
def test_junk_values_only_raise_model_error(tmp_path, key):
    """Whatever a field holds, the loader either builds a Robot or raises ModelError."""
    for junk in _JUNK:
        data = _small_model()
        data[key] = junk
        try:
            robot_from_spatial_v2(data)
        except ModelError as exc:
            assert "\n" not in str(exc)


def test_synthetic_contact_scenarios():
    sw = load_robot("swimmer:n=10")
    assert (sw.nv, sw.n_bodies, len(sw.scenarios["default"])) == (15, 10, 20)
    assert ConstraintSet.parse(sw, sw.scenarios["default"]).m == 60
    bx = load_robot("boxes:n=5")
    assert bx.nv == 30 and all(b.parent == -1 for b in bx.bodies)
    assert ConstraintSet.parse(bx, bx.scenarios["default"]).m == 60     # ground + 4 stacked pairs, 4 points each
    assert load_robot("swimmer").n_bodies == 10
    with pytest.raises(ModelError):
        load_robot("swimmer:n=0")
    with pytest.raises(ModelError):
        load_robot("boxes:m=3")


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


# -- forward kinematics (Robot.frame_placement) against Pinocchio's updateFramePlacements ----------

FIXED_URDF = """<robot name="fixed_mix">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="arm"><inertial><origin xyz="0.1 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="bracket"/>
  <link name="slider"><inertial><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tool"/>
  <link name="wheel"><inertial><mass value="0.3"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0.1 0.2" rpy="0.3 -0.2 0.5"/><axis xyz="0 1 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="bolt" type="fixed"><parent link="arm"/><child link="bracket"/><origin xyz="0.3 0 0" rpy="0 0.7 0"/></joint>
  <joint name="rail" type="prismatic"><parent link="bracket"/><child link="slider"/><origin xyz="0 0 0.05" rpy="0.1 0 -0.4"/><axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="tip" type="fixed"><parent link="slider"/><child link="tool"/><origin xyz="0.02 -0.03 0.1" rpy="-0.5 0.2 1.1"/></joint>
  <joint name="spin" type="continuous"><parent link="slider"/><child link="wheel"/><origin xyz="0 0.05 0" rpy="0 0 0.3"/><axis xyz="0 0 1"/></joint>
</robot>"""


@needs_pinocchio
@pytest.mark.parametrize("spec", ["go1", FIXED_URDF], ids=["go1", "fixed_joints"])
def test_frame_placement_equals_pinocchio(spec):
    """Every body and fixed-joint frame Pinocchio's own URDF parse knows, at 20 random q, to 1e-12."""
    robot = load_robot(spec, floating_base=True if spec == "go1" else False)
    model, _ = oracle.own_model(robot)
    data = model.createData()
    rng = np.random.default_rng(3)
    names = [n for n in robot.frames if model.existFrame(n, pin.BODY)]
    assert len(names) == len(robot.frames) >= 5       # every frame of ours is one of Pinocchio's bodies
    for _ in range(20):
        q = robot.random_q(rng)
        pin.forwardKinematics(model, data, oracle.pinocchio_q(robot, q))
        pin.updateFramePlacements(model, data)
        for n in names:
            R, p = robot.frame_placement(q, n)
            oMf = data.oMf[model.getFrameId(n, pin.BODY)]
            assert np.abs(R - oMf.rotation).max() < 1e-12 and np.abs(p - oMf.translation).max() < 1e-12, n


def test_frame_placement_refuses_unknown_names_and_bad_q():
    robot = load_robot(FIXED_URDF, floating_base=False)
    with pytest.raises(ModelError, match=r"unknown link or frame .* 'tol'; did you mean 'tool'"):
        robot.frame_placement(robot.neutral_q(), "tol")
    from casadi_delassus.errors import InputError
    for q in ([0.0] * (robot.nq + 1), [float("nan")] * robot.nq, ["a"] * robot.nq):
        with pytest.raises(InputError, match="^q "):
            robot.frame_placement(q, "tool")
