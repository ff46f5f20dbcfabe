"""Property-based fuzzing (issue 11, "Done when" 5; issue 23) of everything a user hands us:
constraint specs and their offsets, the three model loaders (URDF, SDF, spatial_v2 JSON: random
trees with non-finite and huge numbers, odd names, missing fields, cycles), the numeric inputs
of one compiled function and ``out=`` arrays over them, the modes and calls of a contact-mode
library, and peers at a ``--cluster`` address that are no Dask scheduler.  Every example
ends in one of two ways:

- a DelassusError subclass whose message is one non-empty line, or
- a result checked against an independent oracle: Pinocchio's own URDF parse (mass matrix),
  the masses and joint counts written in the document, the document's own matrices (spatial_v2
  round trip), the NumPy reference (specs and numbers), the single call (out= and library
  calls), the rule the input breaks (offsets, masks).

Deterministic for CI (derandomized, no example database) and bounded to a few minutes."""
import json
import math
import socket
import threading
import time
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import casadi_delassus as cd
from casadi_delassus.verify import reference as ref
from casadi_delassus.constraints import KINDS, ConstraintSet
from casadi_delassus.simulation import simulate as sim
from casadi_delassus.contact_modes import library
from casadi_delassus.contact_modes.modes import parse_modes
from casadi_delassus.errors import DelassusError
from casadi_delassus.executor import connect
from casadi_delassus.model import load_robot
from casadi_delassus.model.robot import MAX_MAGNITUDE
from casadi_delassus.model.spatial_v2 import JTYPES, plucker, to_spatial_v2

from conftest import TEST_CFLAGS, model_for
from cli.test_cli import GO1_FEET, in_process

def fuzz(examples):
    """Deterministic settings: derandomized, no example database, no deadline."""
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much, HealthCheck.data_too_large])


def one_line(exc):
    msg = str(exc)
    assert msg.strip() and len(msg.splitlines()) == 1, repr(msg)


def outcome(call):
    """call()'s result, or None after checking that it raised a one-line DelassusError."""
    try:
        result = call()
    except DelassusError as exc:
        one_line(exc)
        event(f"refused: {type(exc).__name__}")
        return None
    event("accepted")
    return result


# -- numbers and names -----------------------------------------------------------------------
HOSTILE = [math.nan, math.inf, -math.inf, 1e308, -1e308, 1e13, 5e-324, 0.0, -0.0]
sane = st.floats(-2, 2, allow_nan=False, allow_infinity=False)
number = st.one_of(sane, sane, sane, sane, st.sampled_from(HOSTILE))
number_text = st.one_of(number.map(repr), number.map(repr), number.map(repr),
                        st.sampled_from(["", "abc", "1 2", "0x10", "--1", "1e", " "]))
odd_name = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=6)


def name(prefix, i, hostile=True):
    return st.one_of(*[st.just(f"{prefix}{i}")] * 6, odd_name) if hostile else st.just(f"{prefix}{i}")


def vec(n, hostile=True):
    """n numbers as text; a document drawn ``hostile`` gets non-finite, huge and junk ones too."""
    return st.lists(number_text if hostile else sane.map(repr), min_size=n, max_size=n).map(" ".join)


# -- URDF ------------------------------------------------------------------------------------
URDF_TYPES = ["revolute", "continuous", "prismatic", "fixed"]
MOVING = {"revolute", "continuous", "prismatic"}
AXES = st.sampled_from(["1 0 0", "0 1 0", "0 0 1", "0 0 -1", "0.6 0.8 0"])
INERTIA = dict(ixx="0.1", iyy="0.2", izz="0.3", ixy="0.01", ixz="0", iyz="0")


def axis_text(hostile):
    return st.one_of(AXES, vec(3)) if hostile else AXES


def inertia_text(hostile):
    return st.one_of(*[st.just(INERTIA)] * 3, st.fixed_dictionaries({k: number_text for k in INERTIA})) \
        if hostile else st.just(INERTIA)


def mass_text(hostile):
    return st.one_of(*[st.just("1.5")] * 3, number_text) if hostile else st.floats(0.1, 5).map(repr)


@st.composite
def urdf_documents(draw):
    """(text, links, joints): a random tree of up to 6 links; half of them hostile (broken
    numbers, odd names, cycles, unsupported joint types, missing inertials)."""
    hostile = draw(st.booleans())
    n = draw(st.integers(1, 6))
    links = [draw(name("l", i, hostile)) for i in range(n)]
    parents = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    if hostile and n > 1 and draw(st.integers(0, 3)) == 0:        # a cycle, self-loop or second parent
        parents[draw(st.integers(1, n - 1))] = draw(st.integers(0, n - 1))
    kinds = URDF_TYPES + ["floating", "ball", "planar"] if hostile else URDF_TYPES
    joints = [(draw(name("j", i, hostile)), parents[i], i, draw(st.sampled_from(kinds))) for i in range(1, n)]
    parts = []
    for lname in links:
        inertial = ""
        if not hostile or draw(st.integers(0, 6)):                 # hostile: sometimes none
            I = draw(inertia_text(hostile))
            inertial = (f'<inertial><origin xyz={quoteattr(draw(vec(3, hostile)))} rpy={quoteattr(draw(vec(3, hostile)))}/>'
                        f'<mass value={quoteattr(draw(mass_text(hostile)))}/>'
                        f'<inertia {" ".join(f"{k}={quoteattr(v)}" for k, v in I.items())}/></inertial>')
        parts.append(f"<link name={quoteattr(lname)}>{inertial}</link>")
    for jname, p, c, kind in joints:
        parts.append(f'<joint name={quoteattr(jname)} type="{kind}"><parent link={quoteattr(links[p])}/>'
                     f'<child link={quoteattr(links[c])}/><origin xyz={quoteattr(draw(vec(3, hostile)))} '
                     f'rpy={quoteattr(draw(vec(3, hostile)))}/><axis xyz={quoteattr(draw(axis_text(hostile)))}/>'
                     f'<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    robot_name = draw(st.one_of(*[st.just("fuzz")] * 4, odd_name)) if hostile else "fuzz"
    return f"<robot name={quoteattr(robot_name)}>{''.join(parts)}</robot>", links, joints


def pinocchio_mass_matrix(path, q):
    try:
        import pinocchio as pin
        model = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
        M = pin.crba(model, model.createData(), q)
    except Exception:                         # Pinocchio refuses some documents we accept, or has no pin
        return None
    return np.triu(M) + np.triu(M, 1).T


def loaded(path, text):
    """(the robot in ``text`` written to ``path``, or None after a one-line error)."""
    path.write_text(text, encoding="utf-8")
    return outcome(lambda: load_robot(str(path)))


def mass_matrix(robot, seed):
    """The reference M at a random q: finite and positive definite for any model we accept."""
    q = robot.random_q(np.random.default_rng(seed))
    M = ref.mass_matrix(robot, q)
    assert np.all(np.isfinite(M)) and np.linalg.eigvalsh(M).min() > 0
    return q, M


@fuzz(150)
@given(doc=urdf_documents(), seed=st.integers(0, 2 ** 16))
def test_fuzz_urdf(tmp_path, doc, seed):
    text, links, joints = doc
    path = tmp_path / "fuzz.urdf"
    robot = loaded(path, text)
    if robot is None:
        return
    assert robot.nv == 6 + sum(kind in MOVING for *_, kind in joints)      # nothing dropped
    assert set(links) <= set(robot.frames)
    q, M = mass_matrix(robot, seed)
    M_pin = pinocchio_mass_matrix(path, q)
    event("compared with Pinocchio" if M_pin is not None else "Pinocchio refused it")
    if M_pin is not None:
        assert np.abs(M - M_pin).max() <= 1e-9 * np.abs(M_pin).max()


# -- SDF -------------------------------------------------------------------------------------
SDF_TYPES = ["revolute", "prismatic", "fixed", "ball"]


@st.composite
def sdf_documents(draw):
    """(text, link masses, joints): a random model with loops; half of them hostile."""
    hostile = draw(st.booleans())
    n = draw(st.integers(1, 6))
    links = [draw(name("l", i, hostile)) for i in range(n)]
    joints = [(draw(name("j", i, hostile)), draw(st.integers(0, i - 1)), i, draw(st.sampled_from(SDF_TYPES[:3])))
              for i in range(1, n)]
    for k in range(draw(st.integers(0, 2))):                           # extra joints: loops (ball joints)
        p, c = draw(st.integers(0, n - 1)), draw(st.integers(1, n - 1) if n > 1 else st.just(0))
        joints.append((draw(name("x", k, hostile)), p, c,
                       draw(st.sampled_from(SDF_TYPES + ["universal"])) if hostile else "ball"))
    parts, masses = [], []
    for lname in links:
        body = f"<pose>{escape(draw(vec(6, hostile)))}</pose>" if draw(st.booleans()) else ""
        if not hostile or draw(st.integers(0, 5)):
            mass = draw(mass_text(hostile))
            masses.append(mass)
            body += (f"<inertial><pose>{escape(draw(vec(6, hostile)))}</pose><mass>{escape(mass)}</mass>"
                     f"<inertia><ixx>0.1</ixx><iyy>0.2</iyy><izz>0.3</izz></inertia></inertial>")
        else:
            masses.append("1")                                         # SDF's default inertial
        parts.append(f"<link name={quoteattr(lname)}>{body}</link>")
    for jname, p, c, kind in joints:
        parts.append(f"<joint name={quoteattr(jname)} type={quoteattr(kind)}><parent>{escape(links[p])}</parent>"
                     f"<child>{escape(links[c])}</child><pose>{escape(draw(vec(6, hostile)))}</pose>"
                     f"<axis><xyz>{escape(draw(axis_text(hostile)))}</xyz></axis></joint>")
    model = draw(st.one_of(st.just("m"), odd_name)) if hostile else "m"
    return f'<sdf version="1.6"><model name={quoteattr(model)}>{"".join(parts)}</model></sdf>', masses, joints


@fuzz(150)
@given(doc=sdf_documents(), seed=st.integers(0, 2 ** 16))
def test_fuzz_sdf(tmp_path, doc, seed):
    text, masses, joints = doc
    robot = loaded(tmp_path / "fuzz.sdf", text)
    if robot is None:
        return
    first_parent = {}
    for j in joints:
        first_parent.setdefault(j[2], j)
    tree = [j for j in joints if first_parent[j[2]] is j]
    assert robot.nv == 6 + sum(kind in ("revolute", "prismatic") for *_, kind in tree)
    assert len(robot.loops) == len(joints) - len(tree)
    assert math.isclose(sum(b.mass for b in robot.bodies), sum(float(m) for m in masses), rel_tol=1e-12)
    mass_matrix(robot, seed)


# -- spatial_v2 JSON -------------------------------------------------------------------------
junk = st.one_of(st.none(), st.booleans(), number, st.text(max_size=4), st.lists(number, max_size=3),
                 st.just([[math.nan] * 6] * 6), st.just({"a": 1}))


def rotation(rng):
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    return Q * np.sign(np.linalg.det(Q))


def spatial_inertia(m, c, Ic):
    C = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    return np.block([[Ic + m * C @ C.T, m * C], [m * C.T, m * np.eye(3)]])


@st.composite
def spatial_v2_documents(draw):
    """(data, valid): a model of up to 5 bodies, and whether it was left intact."""
    nb = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    data = {"NB": nb, "parent": [draw(st.integers(0, i)) for i in range(nb)],
            "jtype": [draw(st.sampled_from(list(JTYPES))) for _ in range(nb)],
            "Xtree": [plucker(rotation(rng), rng.normal(size=3)).tolist() for _ in range(nb)],
            "I": [spatial_inertia(rng.uniform(0.5, 2), rng.normal(size=3) * 0.1,
                                  np.diag(rng.uniform(0.1, 0.3, 3))).tolist() for _ in range(nb)],
            "bodyNames": [f"b{i}" for i in range(nb)]}
    if draw(st.booleans()):
        data["floating_base"] = True
        data["parent"][0] = 0
    valid = True
    for _ in range(draw(st.integers(0, 2))):                           # break something
        valid = False
        key = draw(st.sampled_from([*data, "NB", "gravity"]))
        if key in ("NB",):
            data[key] = draw(st.one_of(junk, st.sampled_from([0, -1, 1e12, 10 ** 30, nb + 1, 2.5])))
        elif draw(st.booleans()) and isinstance(data.get(key), list) and data[key]:
            data[key][draw(st.integers(0, len(data[key]) - 1))] = draw(st.one_of(junk, odd_name))
        elif key == "gravity":
            data[key] = draw(st.one_of(junk, st.lists(number, min_size=3, max_size=3)))
        else:
            data[key] = draw(junk)
    return data, valid


@fuzz(200)
@given(doc=spatial_v2_documents())
def test_fuzz_spatial_v2(tmp_path, doc):
    data, valid = doc
    robot = loaded(tmp_path / "fuzz.json", json.dumps(data, allow_nan=True))
    if valid:
        assert robot is not None
    if robot is None:
        return
    assert robot.n_bodies == data["NB"]
    back = to_spatial_v2(robot)
    order = [back["bodyNames"].index(n) for n in data.get("bodyNames") or [f"body{i + 1}" for i in range(data["NB"])]]
    for key in ("Xtree", "I"):       # the document's own matrices come back
        got, want = np.array(back[key])[order], np.array(data[key], float).reshape(-1, 6, 6)
        assert np.abs(got - want).max() <= 1e-9 * max(1.0, np.abs(want).max())


# -- constraint specs ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def go1():
    return model_for("go1")


GO1_LINKS = ["FL_foot", "FR_calf", "trunk", "base", "RL_thigh", "FL_foot_fixed", "nope", ""]
valid_spec = st.one_of(
    st.builds(lambda link, kind: f"{link}:{kind}", st.sampled_from(GO1_LINKS[:6]), st.sampled_from(list(KINDS))),
    st.builds(lambda link, p: f"{link}:3d@{p}", st.sampled_from(GO1_LINKS[:6]),
              st.lists(sane.map(repr), min_size=3, max_size=3).map(",".join)),
    st.builds(lambda a, b: f"{a}|{b}:3d", st.sampled_from(["FL_foot", "FR_foot"]), st.sampled_from(["RL_calf", "trunk"])),
    st.sampled_from(["JOINT:FL_calf_joint", "JOINT:root_joint"]))
spec_text = st.one_of(
    valid_spec, valid_spec, valid_spec, valid_spec,
    st.text(max_size=20),
    st.builds(lambda link, kind, off: f"{link}:{kind}{off}", st.sampled_from(GO1_LINKS) | odd_name,
              st.sampled_from([*KINDS, "7d", "3D", "", "6d-inputs"]),
              st.one_of(st.just(""), vec(3).map(lambda v: "@" + v.replace(" ", ",")), st.text(max_size=6).map("@".__add__))),
    st.builds(lambda a, b, kind, pts: f"{a}|{b}:{kind}{pts}", st.sampled_from(GO1_LINKS), st.sampled_from(GO1_LINKS),
              st.sampled_from(["3d", "6d", "random3"]), st.one_of(st.just(""), st.just("@0,0,0;1,nan,0"), st.just("@1,2,3;4,5,6"))),
    st.builds(lambda j: f"JOINT:{j}", st.sampled_from(["root_joint", "FL_calf_joint", "nope", ""]) | odd_name),
)
specs = st.one_of(st.lists(valid_spec, min_size=1, max_size=4), st.lists(spec_text, max_size=4), spec_text, junk,
                  st.binary(max_size=8),
                  st.lists(st.one_of(spec_text, junk, st.binary(max_size=4)), max_size=3))


@fuzz(300)
@given(s=specs, seed=st.integers(0, 2 ** 16))
def test_fuzz_constraint_specs(go1, s, seed):
    cs = outcome(lambda: cd.constraint_set(go1, s)[0])
    if cs is None:
        return
    assert cs.m == sum(c.rows for c in cs.constraints) > 0
    rng = np.random.default_rng(seed)
    D = outcome(lambda: ref.delassus(go1, cs, go1.random_q(rng), cs.random_inputs(rng)))
    if D is not None:
        assert D.shape == (cs.m, cs.m) and np.all(np.isfinite(D)) and np.allclose(D, D.T, rtol=0, atol=1e-12 * np.abs(D).max())


# -- numeric inputs of one compiled function -------------------------------------------------
SPECS = ["FL_foot:3d-input", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"]


@pytest.fixture(scope="module")
def compiled(out_dir, go1):
    f = cd.generate("go1", SPECS, "pv_osimr", out_dir=out_dir)
    return f, ConstraintSet.parse(go1, SPECS)


@st.composite
def q_and_K(draw):
    """(q, K, changed): a valid q and K, sometimes made hostile (``changed`` says how)."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    q = model_for("go1").random_q(rng)
    K = rng.normal(size=(3, 6))
    change = draw(st.sampled_from(["none", "none", "entry", "quaternion", "dtype", "shape", "K entry", "K dtype",
                                   "joint angles", "base position"]))
    if change == "entry":
        q[draw(st.integers(0, q.size - 1))] = draw(st.sampled_from(HOSTILE[:3]))
    elif change == "quaternion":
        q[3:7] *= draw(st.sampled_from([0.0, 0.5, 1 + 1e-9, 1 - 1e-7, 1.001, 3.0, -1.0]))
    elif change == "dtype":
        q = draw(st.sampled_from([q.astype(complex), q.astype(object), q.astype(np.float32), q.astype(str),
                                  np.array([None] * q.size), list(q), [list(q)], q.astype(bool)]))
    elif change == "shape":
        q = draw(st.sampled_from([q[:-1], np.r_[q, 0.0], q.reshape(1, -1), q.reshape(-1, 1), np.zeros((19, 2)), []]))
    elif change == "K entry":
        K[draw(st.integers(0, 2)), draw(st.integers(0, 5))] = draw(st.sampled_from(HOSTILE[:3]))
    elif change == "K dtype":
        K = draw(st.sampled_from([K.astype(complex), K.T, K.ravel(), K[:2], [[1, 2]], "K"]))
    elif change == "joint angles":
        q[7:] = draw(st.lists(st.floats(-1e3, 1e3), min_size=12, max_size=12))
    elif change == "base position":
        q[:3] = draw(st.lists(st.floats(-1e12, 1e12), min_size=3, max_size=3))
    return q, K, change


@fuzz(200)
@given(x=q_and_K())
def test_fuzz_numeric_inputs(compiled, x):
    f, cs = compiled
    q, K, change = x
    D = outcome(lambda: f(q, K_FL_foot=K))
    if change in ("none", "joint angles", "base position"):
        assert D is not None
    if D is None:
        return
    qn = np.asarray(q, float).reshape(-1)
    qn = np.r_[qn[:3], qn[3:7] / np.linalg.norm(qn[3:7]), qn[7:]]
    expected = ref.delassus(model_for("go1"), cs, qn, {"K_FL_foot": np.asarray(K, float).reshape(3, 6)})
    assume(np.linalg.cond(expected) < 1e8)        # a random K can be nearly rank-deficient
    assert np.abs(D - expected).max() <= 1e-9 * np.abs(expected).max()


@fuzz(60)
@given(xs=st.lists(q_and_K(), min_size=1, max_size=9), threads=st.sampled_from([1, 2]))
def test_fuzz_numeric_batches(compiled, xs, threads):
    """A batch of such instances (the first input given per instance, K for all): refused with
    the single call's one-line message for the first instance it refuses, or each instance equal
    to its single call."""
    f, _ = compiled
    K = next((K for _, K, change in xs if change != "K dtype"), None)   # one K for all: hostile values, not types
    assume(K is not None)
    rows = [np.asarray(q) for q, _, change in xs if change not in ("dtype", "shape", "K dtype")]
    assume(rows and all(r.shape == (19,) and r.dtype.kind == "f" for r in rows))
    Q = np.array(rows)
    singles = [outcome(lambda q=q: f(q, K_FL_foot=K)) for q in Q]
    D = outcome(lambda: f(Q, K_FL_foot=K, threads=threads))
    first_bad = next((i for i, s in enumerate(singles) if s is None), None)
    event("refused" if first_bad is not None else "evaluated")
    if first_bad is not None or D is None:
        with pytest.raises(DelassusError) as info:
            f(Q, K_FL_foot=K, threads=threads)
        assert first_bad is not None and str(info.value).startswith(f"instance {first_bad} of the batch: ")
        return
    for i, s in enumerate(singles):
        assert np.abs(D[i] - s).max() <= 1e-14 * max(np.abs(s).max(), 1e-300) or np.array_equal(D[i], s)



# -- spec offsets ----------------------------------------------------------------------------
OFFSET_WORDS = ["0.1", "-0.05", "0", "1e12", "-1e12", "1.0000001e12", "1e13", "1e300", "-1e308", "1_0", "0x1",
                "inf", "nan", "1e-300", "", " 1", "1e", "+2"]
offset_word = st.one_of(sane.map(repr), st.sampled_from(OFFSET_WORDS))


def plain_in_range(word):
    """Whether ``word`` is a number a spec offset may be: float() reads it, no underscore,
    finite, |x| <= MAX_MAGNITUDE."""
    try:
        x = float(word)
    except ValueError:
        return False
    return "_" not in word and math.isfinite(x) and abs(x) <= MAX_MAGNITUDE


@fuzz(150)
@given(words=st.lists(offset_word, min_size=3, max_size=3), form=st.sampled_from(["3d", "3d-world", "pair a", "pair b"]),
       seed=st.integers(0, 2 ** 16))
def test_fuzz_spec_offsets(go1, words, form, seed):
    """An offset is taken exactly when its three numbers are plain, finite and within the
    model numbers' range; then D is finite."""
    point = ",".join(words)
    spec = {"3d": f"FL_foot:3d@{point}", "3d-world": f"FL_foot:3d-world@{point}",
            "pair a": f"FL_foot|RR_foot:3d@{point}", "pair b": f"FL_foot|RR_foot:3d@0,0,0;{point}"}[form]
    cs = outcome(lambda: cd.constraint_set(go1, [spec])[0])
    assert (cs is not None) == all(plain_in_range(w) for w in words), spec
    if cs is not None:
        rng = np.random.default_rng(seed)
        assert np.all(np.isfinite(ref.delassus(go1, cs, go1.random_q(rng), cs.random_inputs(rng))))


# -- out= over the inputs of a batch ---------------------------------------------------------
@fuzz(40)
@given(n=st.integers(1, 12), q_at=st.integers(0, 300), d_at=st.integers(0, 300), threads=st.sampled_from([None, 1, 2]),
       seed=st.integers(0, 2 ** 16))
def test_fuzz_out_over_the_batch_input(compiled, n, q_at, d_at, threads, seed):
    """Q (n x 19) and D (n x 12 x 12) at any places of one buffer, overlapping or not: D holds
    each instance's single call, as with separate arrays."""
    f, _ = compiled
    rng = np.random.default_rng(seed)
    go1 = model_for("go1")
    K = rng.normal(size=(3, 6))
    buf = np.zeros(max(q_at + 19 * n, d_at + 144 * n))
    Q = buf[q_at:q_at + 19 * n].reshape(n, 19)
    Q[:] = [go1.random_q(rng) for _ in range(n)]
    want = [f(q, K_FL_foot=K) for q in Q.copy()]
    D = buf[d_at:d_at + 144 * n].reshape(n, 12, 12)
    event("overlapping" if np.shares_memory(Q, D) else "apart")
    got = f(Q, K_FL_foot=K, out=D, threads=threads)
    assert got is D
    for i, w in enumerate(want):        # the batched code rounds like the single call, up to its lanes' order
        assert np.abs(D[i] - w).max() <= 1e-14 * np.abs(w).max()


# -- a contact-mode library: modes and calls -------------------------------------------------
TWO_FEET = ["FL_foot:3d", "RR_foot:3d"]


@pytest.fixture(scope="module")
def two_feet(tmp_path_factory):
    """go1's two feet, every mode (4), pv_osim at -O0, and each mode's own function."""
    out = tmp_path_factory.mktemp("fuzz_lib")
    lib = library("go1", TWO_FEET, "pv_osim", out_dir=out, cflags=("-O0",), jobs=1)
    return lib, {mask: lib.function(mask) for mask in range(4)}


MODE_WORDS = ["all", "1-of-2", "2-of-2", "3-of-2", "0x3", "0b10", "4", "-", "", " ", "FL_foot", "RR_foot:3d",
              "FL_foot,RR_foot", "FL_foot RR_foot", "nope", "1_0", "9" * 30, "0x" + "f" * 40, "a" * 300]
mode_value = st.one_of(st.sampled_from(MODE_WORDS), st.text(max_size=12), st.integers(-3, 2 ** 70), st.booleans(),
                       st.none(), st.lists(st.sampled_from(["FL_foot", "RR_foot", "RR_foot:3d", 3, b"x"]), max_size=3))


@fuzz(200)
@given(modes=st.one_of(mode_value, st.lists(mode_value, max_size=3)))
def test_fuzz_library_modes(modes):
    """--modes values: one-line refusals, or sorted masks of the two constraints."""
    masks = outcome(lambda: parse_modes(modes, TWO_FEET))
    if masks is not None:
        assert masks == sorted(set(masks)) and masks and all(0 <= m < 4 for m in masks)


@st.composite
def library_calls(draw):
    """(mode, positional, keywords, expected mask or None): a call of the library, sometimes
    with a stray argument, threads of the wrong kind, a masked array or odd shapes."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    go1 = model_for("go1")
    n = draw(st.sampled_from([None, 1, 3]))
    q = go1.random_q(rng) if n is None else np.array([go1.random_q(rng) for _ in range(n)])
    # names out of the library's order (FL_foot, RR_foot) are refused, not reordered
    mode = draw(st.sampled_from([0, 1, 2, 3, "FL_foot", ["FL_foot", "RR_foot"], ["RR_foot", "FL_foot"], 4, -1, True,
                                 "nope", None]))
    change = draw(st.sampled_from(["none", "none", "none", "extra", "threads", "masked", "shape", "out"]))
    args, kw = [q], {}
    if change == "extra":
        args.append(q)
    elif change == "threads":
        kw["threads"] = draw(st.sampled_from([True, False, 0, -1, 1.5, "2", 1, 2]))
    elif change == "masked":
        args[0] = np.ma.masked_array(q, mask=np.zeros(q.shape, bool))
    elif change == "shape":
        args[0] = draw(st.sampled_from([q[..., :-1], np.zeros((2, 5)), q.astype(str), []]))
    good_mode = (3 if mode == ["FL_foot", "RR_foot"] else None) if isinstance(mode, list) else mode if type(mode) is int and 0 <= mode < 4 else \
        1 if mode == "FL_foot" else None
    if change == "out" and good_mode:
        rows = 3 * bin(good_mode).count("1")
        kw["out"] = np.zeros((rows, rows) if n is None else (n, rows, rows))
    ok_threads = change != "threads" or (type(kw["threads"]) is int and kw["threads"] >= 1)
    valid = good_mode is not None and change in ("none", "out") or (change == "threads" and good_mode is not None and ok_threads)
    return mode, args, kw, (good_mode if valid else None)


@fuzz(150)
@given(call=library_calls())
def test_fuzz_library_calls(two_feet, call):
    """A library call gives its mode's function's result, or a one-line refusal; a call the
    single function takes is never refused, one it refuses never answered."""
    lib, functions = two_feet
    mode, args, kw, mask = call
    got = outcome(lambda: lib(mode, *args, **kw))
    assert (got is not None) == (mask is not None), (mode, kw, mask)
    if got is None:
        return
    q = np.asarray(args[0])
    if mask == 0:
        assert got.shape == ((0, 0) if q.ndim == 1 else (len(q), 0, 0))
        return
    want = functions[mask](q)
    assert np.abs(got - want).max() <= 1e-14 * np.abs(want).max() and ("out" not in kw or got is kw["out"])


# -- peers at a --cluster address ------------------------------------------------------------
def serve_once(sock, reply, hold, stop):
    """Accept connections on ``sock`` until ``stop``; send ``reply`` to each, then hold it open
    or close it."""
    held = []
    while not stop.is_set():
        try:
            c, _ = sock.accept()
        except OSError:
            continue
        try:
            c.sendall(reply)
        except OSError:
            pass
        (held.append if hold else lambda x: x.close())(c)
    for c in held:
        c.close()


PEER_REPLIES = [b"", b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\x00" * 8, b"\x08" + b"\x00" * 7 + b"\x00" * 8,
                b"\xff" * 8, b"SSH-2.0-OpenSSH_9.6\r\n", (1 << 60).to_bytes(8, "little")]


@fuzz(12)
@given(reply=st.one_of(st.sampled_from(PEER_REPLIES), st.binary(max_size=64)), hold=st.booleans())
def test_fuzz_cluster_peers(reply, hold):
    """Whatever a peer that is not a Dask scheduler sends (or not), connecting ends in one
    line within a bounded time, never a hang or an allocation sized by the peer's bytes."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.1)
    stop = threading.Event()
    server = threading.Thread(target=serve_once, args=(sock, reply, hold, stop), daemon=True)
    server.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(DelassusError) as err:
            with connect(f"tcp://127.0.0.1:{sock.getsockname()[1]}", timeout_s=1):
                pass
    finally:
        stop.set()
        server.join(5)
        sock.close()
    one_line(err.value)
    assert time.perf_counter() - t0 < 15


# -- the contact step, its batch, its derivatives, MuJoCo's soft step, check_precision, CudaFunction (issue 31) ------
# A call gets a valid go1_slide argument set with one argument made hostile by a recipe (which, how), and ends in a
# one-line DelassusError or an honest status: an answer called converged meets its tolerance by the test's own NumPy
# residual on Pinocchio's G and g (contact_residual), a batch equals its single calls, MuJoCo's forces equal MuJoCo's.
STEP_ARGS = ["q", "v", "tau", "dt", "mu", "normals", "lam0", "gap", "tol", "max_iter", "omega", "rho", "eta"]
NUMBER_ARGS = {"dt", "mu", "tol", "max_iter", "omega", "rho", "eta"}
ODD_VALUES = [*HOSTILE, 2 ** 31, 2 ** 63, 1e10, -1, 0.5, 3, True, None, "1e-8", [1e-3], [1e-3, 2e-3], np.float32(1e-3),
              np.array(1e-3), np.ma.masked_array([0.5], mask=[True]), 1 + 0j]
HOW = ["entry", "dtype", "shape", "order", "alias", "huge", "masked"]


def corrupted(a, how, draw, alias=None):
    """The valid array ``a`` made hostile: an entry non-finite or huge, another dtype, another shape, a strided or
    Fortran view of the same numbers (valid), the very array ``alias`` (another argument's; valid when it fits),
    everything scaled huge, masked."""
    a = np.array(a, dtype=float)
    if how == "entry" and a.size:
        a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(HOSTILE))
    elif how == "dtype":
        a = draw(st.sampled_from([a.astype(complex), a.astype(object), a.astype(str), a.astype(bool),
                                  a.astype(np.float32), a.tolist(), np.array([None] * a.size), "abc"]))
    elif how == "shape":
        a = draw(st.sampled_from([a.ravel()[:-1], np.r_[a.ravel(), 0.0], a.reshape(1, -1), a.reshape(-1, 1),
                                  np.zeros((2, 2, 2)), np.zeros(0), np.float64(0.5)]))
    elif how == "order":
        a = np.repeat(a.ravel(), 2)[::2].reshape(a.shape) if a.ndim < 2 else np.asfortranarray(a)
    elif how == "alias" and alias is not None:
        a = alias
    elif how == "huge":
        a = a * draw(st.sampled_from([1e150, 1e300, -1e300]))
    elif how == "masked":
        a = np.ma.masked_array(a, mask=np.zeros(a.shape, bool))
    return a


@st.composite
def step_recipes(draw):
    """(argument, how, value or None, solver, relaxed, seed): which argument of a step call to make hostile."""
    which = draw(st.sampled_from(STEP_ARGS + ["none", "none"]))
    how = draw(st.sampled_from(["odd"] + HOW if which in NUMBER_ARGS else HOW))
    value = draw(st.sampled_from(ODD_VALUES)) if how == "odd" else None
    return which, how, value, draw(st.sampled_from(["admm", "pgs"])), draw(st.booleans()), draw(st.integers(0, 2 ** 16))


@pytest.fixture(scope="module")
def contact(tmp_path_factory):
    """go1_slide's problem, its compiled step (dense route) and the step's derivatives (TEST_CFLAGS)."""
    pytest.importorskip("pinocchio")
    from casadi_delassus.stepping.derivatives import step_derivatives
    from casadi_delassus.verify import contact_problems as cp
    out = tmp_path_factory.mktemp("fuzz_contact")
    p = cp.build("go1_slide")
    step = cd.contact_step("go1", p.specs, out_dir=out, cflags=TEST_CFLAGS, delassus="pv_osim", linear_solve="dense")
    return p, step, step_derivatives("go1", p.specs, out_dir=out, cflags=TEST_CFLAGS)


def step_arguments(p, recipe, draw):
    """A valid go1_slide argument set (the joints moved a little), with one argument made hostile by ``recipe``."""
    which, how, value, solver, relaxed, seed = recipe
    rng = np.random.default_rng(seed)
    q = p.q.copy()
    q[7:] += rng.normal(scale=0.05, size=q.size - 7)
    args = dict(q=q, v=p.v + rng.normal(scale=0.1, size=p.v.size), tau=p.tau.copy(), dt=p.dt, mu=0.3,
                normals=None, lam0=None, gap=None, tol=1e-10, max_iter=1000, omega=1.0, rho=0.0, eta=1e-8)
    valid = dict(normals=np.tile([0.0, 0.0, 1.0], (4, 1)), lam0=np.zeros(12), gap=np.zeros(4))
    if which in NUMBER_ARGS:
        args[which] = value if how == "odd" else corrupted(args[which], how, draw, alias=args["v"])
    elif which != "none":
        args[which] = corrupted(valid.get(which, args[which]), how, draw, alias=args["v"] if which != "v" else args["tau"])
    return args


def contact_residual(G, g, mu, lam, exact=True):
    """The largest NCP residual of λ for (G, g, μ) by the test's own NumPy: distance to the friction cone, of
    σ + Γ(σ) to its dual, complementarity and the approach speed −σ_n."""
    mu = np.broadcast_to(np.asarray(mu, float), (len(g) // 3,))
    b, z = lam.reshape(-1, 3), (G @ lam + g).reshape(-1, 3)
    approach = max(0.0, -z[:, 2].min())
    if exact:
        z = z + np.c_[np.zeros((len(z), 2)), mu * np.hypot(z[:, 0], z[:, 1])]
    primal = np.hypot(b[:, 0], b[:, 1]) - mu * b[:, 2]
    rt = np.hypot(z[:, 0], z[:, 1])
    dual = np.where(mu > 0, (mu * rt - z[:, 2]) / np.sqrt(1 + mu ** 2), -z[:, 2])     # distance to μ‖z_t‖ ≤ z_n
    inside = (mu * rt <= z[:, 2]) | (mu == 0) & (z[:, 2] >= 0)
    polar = rt <= -mu * z[:, 2]                      # in −K: the apex is the nearest point of the dual cone
    dual = np.where(inside, 0.0, np.where(polar & (mu > 0), np.hypot(rt, z[:, 2]), np.maximum(dual, 0.0)))
    return max(np.maximum(primal, 0).max(), dual.max(), np.abs(np.sum(b * z, axis=1)).max(), approach)


def the_problem(p, args, q=None):
    """Pinocchio's (G, g) of the step call ``args`` in its contact frames, gap added (the problem it solves)."""
    from casadi_delassus.contact.step import contact_frames
    from casadi_delassus.verify import contact_problems as cp
    q = np.asarray(args["q"], float) if q is None else q
    q = np.r_[q[:3], q[3:7] / np.linalg.norm(q[3:7]), q[7:]]
    G, g, _, _ = cp.delassus_and_free_velocity(p.model, p.frames, q, np.asarray(args["v"], float),
                                               np.asarray(args["tau"], float), float(np.asarray(args["dt"])))
    if args["normals"] is not None:
        frames = contact_frames(np.broadcast_to(np.asarray(args["normals"], float), (4, 3)))
        B = np.zeros((12, 12))
        for i, R in enumerate(frames):
            B[3 * i:3 * i + 3, 3 * i:3 * i + 3] = R
        G, g = B @ G @ B.T, B @ g
    if args["gap"] is not None:
        g = g.copy()
        g[2::3] += np.asarray(args["gap"], float).ravel()
    return G, g


def honest(r, G, g, mu, tol, exact):
    """A step's answer is honest: a known status, and when converged its own residual on (G, g) within tol."""
    assert r.status in ("converged", "max iterations", "NaN"), r.status
    event(r.status)
    if r.converged:
        scale = max(1.0, np.abs(g).max(), np.abs(G).max() * np.abs(r.lam).max())
        assert contact_residual(G, g, mu, r.lam, exact) <= tol + 1e-9 * scale, (contact_residual(G, g, mu, r.lam, exact), tol)


@fuzz(150)
@given(recipe=step_recipes(), data=st.data())
def test_fuzz_the_contact_step(contact, recipe, data):
    p, step, _ = contact
    args = step_arguments(p, recipe, data.draw)
    step.solver, step.exact = recipe[3], not recipe[4]
    r = outcome(lambda: step(**args))
    if r is not None:
        honest(r, *the_problem(p, args), args["mu"], float(args["tol"]), step.exact)


@fuzz(60)
@given(recipes=st.lists(step_recipes(), min_size=1, max_size=4), per_state=st.sampled_from(["one", "each", "short", "nan"]),
       threads=st.sampled_from([1, 2, None, 0, True, 1.5, "2", 2 ** 63]), data=st.data())
def test_fuzz_the_batched_step(contact, recipes, per_state, threads, data):
    """N rows, each a recipe's q, v or τ made hostile, dt one or per state (or of the wrong length or NaN), threads
    valid or not: refused in one line when some row's single call is, else each row equal to its single call."""
    p, step, _ = contact
    step.solver, step.exact = "admm", True
    rows = [step_arguments(p, (r[0] if r[0] in ("q", "v", "tau") else "none", *r[1:]), data.draw) for r in recipes]
    n = len(rows)
    dt = {"one": p.dt, "each": p.dt * (1 + np.arange(n)), "short": np.full(n + 1, p.dt),
          "nan": np.r_[np.full(n - 1, p.dt), np.nan]}[per_state]
    singles = [outcome(lambda k=k, a=a: step(a["q"], a["v"], a["tau"], dt=np.broadcast_to(dt, (n,))[k]
                                             if per_state in ("one", "each") else p.dt))
               for k, a in enumerate(rows)]
    try:
        Q, V, TAU = (np.array([a[k] for a in rows], dtype=float) for k in ("q", "v", "tau"))
    except (ValueError, TypeError):
        Q = V = TAU = [a["q"] for a in rows]
    b = outcome(lambda: step(Q, V, TAU, dt=dt, threads=threads))
    if b is None:
        return
    assert all(one is not None for one in singles) and per_state in ("one", "each")
    for k, one in enumerate(singles):
        assert np.array_equal(b.lam[k], one.lam) and np.array_equal(b.v_next[k], one.v_next), k
        assert b.status[k] == one.status and b.iterations[k] == one.iterations


@fuzz(60)
@given(recipe=step_recipes(), lam_how=st.sampled_from(["solution", "solution", "entry", "dtype", "shape", "scaled",
                                                        "zero", "huge"]),
       tangent=st.sampled_from(["ok", "short", "nan", "text", "masked"]), data=st.data())
def test_fuzz_the_step_derivatives(contact, recipe, lam_how, tangent, data):
    """A derivative point at hostile arguments, λ the step's solution or not: one-line refusal, or matrices at a λ
    that solves its problem to step_derivatives.SOLUTION_TOL by the test's own residual."""
    from casadi_delassus.contact.step_derivatives import SOLUTION_TOL
    p, step, deriv = contact
    step.solver, step.exact = "admm", True
    which = recipe[0] if recipe[0] in ("q", "v", "tau", "dt", "mu", "normals") else "none"
    args = step_arguments(p, (which, *recipe[1:]), data.draw)
    solved = outcome(lambda: step(args["q"], args["v"], args["tau"], dt=args["dt"], mu=args["mu"],
                                  normals=args["normals"], tol=1e-12))
    lam = solved.lam if solved is not None and solved.converged else np.zeros(12)
    lam = {"scaled": 1.5 * lam, "zero": 0 * lam, "huge": 1e300 * lam}.get(lam_how, lam)
    if lam_how in ("entry", "dtype", "shape"):
        lam = corrupted(lam, lam_how, data.draw)
    point = outcome(lambda: deriv.point(args["q"], args["v"], args["tau"], lam, dt=args["dt"], mu=args["mu"],
                                        normals=args["normals"]))
    if point is None:
        return
    G, g = the_problem(p, args)
    assert contact_residual(G, g, args["mu"], point.lam) <= SOLUTION_TOL + 1e-9 * max(1.0, np.abs(g).max())
    nv = deriv.robot.nv
    x = {"ok": np.ones(nv), "short": np.ones(nv - 1), "nan": np.full(nv, np.nan), "text": "x",
         "masked": np.ma.masked_array(np.ones(nv))}[tangent]
    out = outcome(lambda: deriv.jvp(point, np.zeros(nv), np.zeros(nv), x))
    assert (out is not None) == (tangent == "ok")
    if out is not None:
        assert np.all(np.isfinite(out[0])) and out[0].shape == (nv,)


@pytest.fixture(scope="module")
def go2_soft(tmp_path_factory):
    """Go2 standing on MuJoCo's soft contacts: its compiled step, the model, data and the step's arguments."""
    pytest.importorskip("mujoco")
    from casadi_delassus import mujoco_contact_step
    from casadi_delassus.mujoco_model.soft_step import mujoco_contacts, soft_parameters
    from casadi_delassus.errors import ModelError
    from casadi_delassus.verify.mujoco_contact_scenes import scene, state
    try:
        m = scene("go2", "elliptic")
    except ModelError:
        pytest.skip("robosuite-models (Go2's MJCF) is not installed")
    d = state(m, "go2", "standing")
    c = mujoco_contacts(m, d)
    s = mujoco_contact_step(m, c.specs, out_dir=tmp_path_factory.mktemp("fuzz_mjsoft"), cflags=TEST_CFLAGS)
    args = [d.qpos, d.qvel, d.qfrc_applied, c.frames, c.friction, c.dims, c.offsets, *soft_parameters(m, c, False)]
    return s, m, d, args


SOFT_ARGS = ["q", "v", "tau", "frames", "friction", "dims", "offsets", "R", "B", "Kr"]


@fuzz(80)
@given(which=st.sampled_from(SOFT_ARGS + ["warm", "tol", "max_iter", "rho", "none", "none"]),
       how=st.sampled_from(HOW + ["odd", "zero", "negative", "scaled"]), value=st.sampled_from(ODD_VALUES),
       data=st.data())
def test_fuzz_mujoco_soft_step(go2_soft, which, how, value, data):
    """MuJoCo's soft step with one argument made hostile: one-line refusal, or an honest status, and forces equal
    to MuJoCo's own whenever it says converged on MuJoCo's own problem (the same numbers, any layout, any warm start,
    max_iter or ρ)."""
    s, m, d, valid = go2_soft
    args = [np.array(a, dtype=float) for a in valid]
    options = dict(tol=1e-12, max_iter=100000, rho=0.0)
    replaced = {"zero": lambda a: 0 * a, "negative": lambda a: -a, "scaled": lambda a: 2 * a, "odd": lambda a: value}
    if which in SOFT_ARGS:
        i = SOFT_ARGS.index(which)
        args[i] = replaced[how](args[i]) if how in replaced else corrupted(args[i], how, data.draw,
                                                                          alias=args[(i + 1) % len(args)])
    elif which == "warm":
        options["force_warm"] = replaced[how](d.efc_force) if how in replaced else corrupted(d.efc_force, how, data.draw)
    elif which != "none":
        options[which] = value if how == "odd" else corrupted(options[which], how, data.draw)
    own = which in ("none", "warm", "max_iter", "rho") or (which in SOFT_ARGS and how == "order")
    r = outcome(lambda: s(*args, **options))
    if r is None:
        return
    assert r.status in ("converged", "max iterations", "not finite")
    event(r.status)
    if r.status == "converged":
        assert np.all(np.isfinite(r.force)) and np.all(np.isfinite(r.qacc))
        if own or (which == "tol" and float(np.asarray(options["tol"])) <= 1e-10):
            assert np.abs(r.force - d.efc_force).max() <= 1e-6 * np.abs(d.efc_force).max()


@pytest.fixture(scope="module")
def single_go1(tmp_path_factory):
    """go1's pv_osim in single precision (and, through check_precision, its double twin)."""
    return cd.generate("go1", SPECS[1:], "pv_osim", out_dir=tmp_path_factory.mktemp("fuzz_single"), precision="single")


@fuzz(15)
@given(samples=st.sampled_from([0, -1, 1.5, "3", None, True, 2 ** 63, 10 ** 9, np.int64(0), 1, 2, np.int64(3), 1, 2]),
       seed=st.integers(0, 2 ** 16))
def test_fuzz_check_precision(single_go1, samples, seed):
    """check_precision's samples: one-line refusal (also of a count that would run for ever: 2^63 once did), or a
    report over exactly that many samples."""
    r = outcome(lambda: cd.check_precision(single_go1, samples=samples, seed=seed))
    if r is not None:
        assert r["samples"] == samples and np.isfinite(r["worst"]) and r["passed"] == (r["worst"] <= r["allowed"])


@pytest.fixture(scope="module")
def cuda_go1(compiled, tmp_path_factory):
    """The CUDA form of the pv_osimr function above, its .cu built on the host through the shim (no nvcc)."""
    from casadi_delassus.codegen import cuda
    from casadi_delassus.runtime.cuda import CudaFunction
    f, _ = compiled
    path = cuda.derive(f.manifest_path, "double", "soa", nvcc=None)
    so = cuda.host_library(path.with_suffix(".cu"), tmp_path_factory.mktemp("fuzz_cuda") / "go1-host.so",
                           f.manifest["cflags"])
    return f, CudaFunction(path, host_library=so), path, so


@fuzz(60)
@given(xs=st.lists(q_and_K(), min_size=1, max_size=4), ctor=st.sampled_from(["ok"] * 4 + ["array", "int", "none-path"]))
def test_fuzz_cuda_function(cuda_go1, xs, ctor):
    """CudaFunction's constructor and host call with hostile arrays: one-line refusal, or the C target's numbers."""
    from casadi_delassus.runtime.cuda import CudaFunction
    f, g, path, so = cuda_go1
    if ctor != "ok":
        bad = {"array": (np.zeros(3), np.zeros(3)), "int": (3, so), "none-path": (path, 7)}[ctor]
        assert outcome(lambda: CudaFunction(*bad)) is None
        return
    K = xs[0][1]
    rows = [q for q, _, _ in xs]
    try:
        Q = np.array(rows, dtype=float) if len(rows) > 1 else rows[0]
    except (ValueError, TypeError):
        Q = rows[0]
    got = outcome(lambda: g(Q, K_FL_foot=np.broadcast_to(K, (len(rows), 3, 6)) if len(rows) > 1 and np.ndim(Q) == 2
                               else K))
    if got is None:
        return
    want = outcome(lambda: f(Q, K_FL_foot=K))
    assert want is not None                      # what the GPU host path takes, the C target takes
    assert np.abs(np.asarray(got) - want).max() <= 1e-13 * max(np.abs(want).max(), 1e-300)


# -- the rollout, the rollout batch and the CLI's step and simulate (issue 31) --------------------
ROLL_FEET = [f"{leg}_foot@-0.0173782,0,-0.0098993" for leg in ("FL", "FR", "RL", "RR")]
ROLL_TOL = 1e-10
small_time = st.one_of(st.floats(0.0, 0.02), st.sampled_from(HOSTILE + [1e300, -1.0]))
time_step = st.one_of(st.floats(5e-4, 2e-3), st.floats(5e-4, 2e-3), st.sampled_from(HOSTILE + [-1e-3]))
unit = st.sampled_from([(0.0, 0.0, 1.0), (0.0, 0.0, 1.0), (0.0, np.sin(0.2), np.cos(0.2))])
ground_normal = st.one_of(unit, unit, st.lists(number, min_size=0, max_size=4).map(tuple))
friction = st.one_of(st.floats(0.0, 2.0), st.floats(0.0, 2.0), number,
                     st.lists(st.floats(0, 1), min_size=1, max_size=5), st.just("high"))


@pytest.fixture(scope="module")
def rollouts(out_dir):
    """go1's scene factory and its standing pose; the compiled step and rollout built once (out_dir)."""
    go1 = model_for("go1")
    factory = sim.factory("compiled", "admm", tol=ROLL_TOL, out_dir=out_dir)
    factory.rollout(sim.Scene(go1, ROLL_FEET), go1.neutral_q())
    return go1, factory


@st.composite
def start_states(draw, nq=19, nv=18):
    """(q0, v0): go1 standing a little above or into the ground, moving, sometimes hostile (an entry, the dtype,
    the shape, a masked array)."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    q = model_for("go1").neutral_q()
    q[2] = 0.42 + draw(st.floats(-0.01, 0.02))          # go1's neutral feet touch near base height 0.42 m
    q[7:] += 0.05 * rng.normal(size=12)
    v = 0.2 * rng.normal(size=nv)
    change = draw(st.sampled_from(["none", "none", "none", "entry", "velocity", "dtype", "shape", "masked"]))
    if change == "entry":
        q[draw(st.integers(0, nq - 1))] = draw(st.sampled_from(HOSTILE))
    elif change == "velocity":
        v[draw(st.integers(0, nv - 1))] = draw(st.sampled_from(HOSTILE))
    elif change == "dtype":
        q = draw(st.sampled_from([q.astype(complex), q.astype(str), np.array([None] * nq), list(q)]))
    elif change == "shape":
        v = draw(st.sampled_from([v[:-1], np.r_[v, 0.0], v.reshape(2, -1), np.zeros(0)]))
    elif change == "masked":
        q = np.ma.masked_array(q, mask=np.arange(nq) == 3)
    return q, v


def honest_rollout(r, mu, tau_limit=1e6, tol=ROLL_TOL):
    """A rollout's records say what happened: known statuses, one more state unless it stopped, finite states when it
    ran to the end, every step that went on with finite gaps (a NaN gap is neither touching nor free) and torques
    within the limit, and every solved step's forces in the friction cone (an independent NumPy check) with the
    solver's residual within its tolerance (rounding of the impulses' size above it)."""
    assert set(r.statuses) <= set(sim.ROLLOUT_STATUSES)
    went_on = np.array([s not in sim.STOPPING for s in r.statuses], dtype=bool)
    assert np.all(np.isfinite(r.gaps[went_on])) and np.all(np.abs(r.tau[went_on]) <= tau_limit)
    assert len(r.q) == len(r.statuses) + (0 if r.statuses and r.statuses[-1] in sim.STOPPING else 1)
    if r.completed:
        assert np.all(np.isfinite(r.q)) and np.all(np.isfinite(r.v))
    for k, status in enumerate(r.statuses):
        f = r.forces[k]
        if status == sim.FREE:
            assert not f.any()
        elif status in (sim.OK, sim.COLD):
            scale = max(np.abs(f).max() * r.dt, 1e-300)
            assert r.residuals[k] <= tol + 1e-12 * scale, (k, r.residuals[k])
            slack = 1e-9 * np.abs(f).max() + tol / r.dt
            assert np.all(f[:, 2] >= -slack) and np.all(np.hypot(f[:, 0], f[:, 1]) <= mu * f[:, 2] + slack)
    event(f"status: {r.status}")


def mostly(usual, hostile):
    """``usual`` four times in five: with ten inputs drawn so, a run with all of them valid is not rare."""
    return st.one_of(*[usual] * 4, hostile)


@fuzz(60)
@given(state=start_states(), T=mostly(st.floats(0.001, 0.02), small_time), dt=mostly(st.floats(5e-4, 2e-3), time_step),
       height=mostly(st.floats(-0.01, 0.01), number), margin=mostly(st.just(1e-6), number), mu=friction,
       normal=ground_normal, beta=mostly(st.floats(0, 1), number), tau_limit=mostly(st.just(1e6), number),
       gains=st.tuples(mostly(st.floats(0, 100), number), mostly(st.floats(0, 3), number)))
def test_fuzz_rollout(rollouts, state, T, dt, height, margin, mu, normal, beta, tau_limit, gains):
    """The C rollout (a PD on the compiled step) from hostile states, durations, steps, grounds, frictions,
    Baumgarte terms, torque limits and gains: a one-line refusal, or a rollout whose records are honest."""
    go1, factory = rollouts
    scene = outcome(lambda: sim.Scene(go1, ROLL_FEET, normal=normal, height=height, mu=mu, margin=margin))
    pd = outcome(lambda: cd.pd_controller(go1, go1.neutral_q(), *gains))
    if scene is None or pd is None:
        return
    r = outcome(lambda: sim.run(scene, *state, T, dt, pd, factory, baumgarte=beta, tau_limit=tau_limit))
    if r is not None:
        honest_rollout(r, scene.mu, tau_limit)


@fuzz(30)
@given(states=st.lists(start_states(), min_size=1, max_size=4), T=small_time, dt=time_step,
       threads=st.sampled_from([1, 2, None, 2 ** 63, True, 0, -2, 1.5, "2", np.int64(3)]), beta=st.sampled_from([0.0, 0.1, 0.5]),
       draw_whole=st.booleans())
def test_fuzz_rollout_batch(rollouts, states, T, dt, threads, beta, draw_whole):
    """run_batch on the C rollout with hostile rows and thread counts: one line, or each environment honest and equal
    to its own single rollout (bit for bit)."""
    from casadi_delassus.simulation.simulate_batch import run_batch
    go1, factory = rollouts
    scene = sim.Scene(go1, ROLL_FEET)
    pd = cd.pd_controller(go1, go1.neutral_q(), 60.0, 2.0)
    Q0, V0 = (states[0][i] if len(states) == 1 and draw_whole else [s[i] for s in states] for i in (0, 1))
    b = outcome(lambda: run_batch(scene, Q0, V0, T, dt, pd, factory, threads=threads, baumgarte=beta))
    if b is None:
        return
    Q0, V0 = np.array(Q0, dtype=float).reshape(-1, go1.nq), np.array(V0, dtype=float).reshape(-1, go1.nv)
    for e in range(len(Q0)):
        r = sim.run(scene, Q0[e], V0[e], T, dt, pd, factory, baumgarte=beta)
        n = len(r.statuses)
        assert list(b.statuses[:n, e]) == r.statuses and np.array_equal(b.q[:len(r.q), e], r.q, equal_nan=True)
        honest_rollout(r, scene.mu)


def _cli_refusal_or_result(code, out, err):
    """A CLI outcome: exit 2 with one line on stderr and no traceback, or a run that said how it ended (0, 1)."""
    assert "Traceback" not in err and code in (0, 1, 2), (code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
        event("refused")
    else:
        event(f"exit {code}")
    return code


cli_number = st.one_of(st.floats(-1, 1).map(repr), st.sampled_from(["nan", "inf", "-inf", "1e300", "-0", "0", "abc", "",
                                                                  "1e-300", "5e-324", "1,2", "3000000000"]))


@fuzz(20)
@given(mu=st.one_of(st.sampled_from(["0.8", "0.5"]), cli_number),
       samples=st.sampled_from(["1", "2", "0", "-3", "1e9", "1000000000", "x", "10001"]),
       solver=st.sampled_from(["admm", "pgs", "auto"]))
def test_fuzz_cli_step(out_dir, mu, samples, solver):
    """`casadi-delassus step` with hostile --mu and --samples: one line and exit 2, or a check that ran on at least one
    sample (the count it prints is the count asked for)."""
    code, out, err = in_process("step", "go1", "-c", "FL_foot:3d-world@-0.0173782,0,-0.0098993", "-c", "RR_foot:3d-world",
                                "--mu", mu, "--samples", samples, "--solver", solver, "-o", str(out_dir))
    if _cli_refusal_or_result(code, out, err) != 2:
        assert f"{int(samples)} random states" in out and int(samples) >= 1


@fuzz(25)
@given(args=st.lists(st.tuples(st.sampled_from(["--dt", "--height", "--mu", "--kp", "--baumgarte", "--drop", "--tol",
                                                 "--max-iter"]), cli_number), max_size=2),
       T=mostly(st.sampled_from(["0.005", "0.01"]), st.sampled_from(["0", "0.0004", "nan", "1e300", "-1", "abc"])),
       normal=st.sampled_from([[], ["--normal", "0,0,1"], ["--normal", "0,0,2"], ["--normal", "nan,0,1"], ["--normal", "0,1"]]))
def test_fuzz_cli_simulate(out_dir, tmp_path, args, T, normal):
    """`casadi-delassus simulate` with hostile numbers (a PD with --kd 2, so that every run is the C rollout, built
    once): one line and exit 2 with nothing written, or a rollout whose CSV is there (exit 0, or 1 when it stopped
    early)."""
    import shutil
    shutil.rmtree(tmp_path / "sim", ignore_errors=True)
    code, out, err = in_process("simulate", "go1", *GO1_FEET, "--kd", "2", "-T", T, *[x for pair in args for x in pair],
                                *normal, "--out-dir", str(out_dir), "-o", str(tmp_path / "sim"))
    if _cli_refusal_or_result(code, out, err) == 2:
        assert not (tmp_path / "sim").exists() or "no figure" in err or "cannot write" in err
    else:
        assert (tmp_path / "sim" / "rollout.csv").is_file() and " steps of " in out
