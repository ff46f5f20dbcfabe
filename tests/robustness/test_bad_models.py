"""Hostile model files (issue 11, "Bad input"): each is one ModelError naming the problem, exit
2 from the CLI, never a traceback, a NaN model or a silently smaller robot."""
import json
import tracemalloc

import numpy as np
import pytest

from casadi_delassus import load_robot
from casadi_delassus.errors import ModelError
from casadi_delassus.model.robot import MAX_MAGNITUDE

from cli_runner import run_cli

INERTIA = 'ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"'


def link(name, mass="1", inertia=INERTIA, com="0 0 0"):
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>'
            f'<inertia {inertia}/></inertial></link>')


def joint(name, parent, child, xyz="0 0 0.1", rpy="0 0 0", axis="0 0 1", kind="revolute"):
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>'
            f'<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')


def urdf(tmp_path, body, name="r", file="robot.urdf"):
    p = tmp_path / file
    p.write_text(f'<robot name="{name}">{body}</robot>' if name is not None else f"<robot>{body}</robot>")
    return p


def two_links(**kw):
    """Links a -> b through joint j; keyword arguments go to b's link or to j."""
    link_kw = {k: kw.pop(k) for k in ("mass", "inertia", "com") if k in kw}
    return link("a") + link("b", **link_kw) + joint("j", "a", "b", **kw)


def one_line_model_error(path, *words):
    with pytest.raises(ModelError) as err:
        load_robot(str(path))
    msg = str(err.value)
    assert "\n" not in msg and msg.strip(), msg
    for w in words:
        assert w in msg, msg
    return msg


# -- URDF: numbers ---------------------------------------------------------------------------
NON_FINITE = {
    "origin xyz nan": (dict(xyz="nan 0 0"), "joint 'j': <origin>"),
    "origin rpy inf": (dict(rpy="0 inf 0"), "joint 'j': <origin>"),
    "axis nan": (dict(axis="0 nan 1"), "joint 'j': <axis>"),
    "mass nan": (dict(mass="nan"), "link 'b': <inertial> <mass>"),
    "mass inf": (dict(mass="inf"), "link 'b': <inertial> <mass>"),
    "inertia inf": (dict(inertia=INERTIA.replace('ixx="0.1"', 'ixx="inf"')), "link 'b': <inertial> <inertia>"),
    "inertia nan": (dict(inertia=INERTIA.replace('iyz="0"', 'iyz="nan"')), "link 'b': <inertial> <inertia>"),
    "com nan": (dict(com="0 nan 0"), "link 'b': <inertial> <origin>"),
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_urdf_non_finite_numbers(tmp_path, case):
    kw, where = NON_FINITE[case]
    one_line_model_error(urdf(tmp_path, two_links(**kw)), where, "non-finite")


@pytest.mark.parametrize("kw, where", [
    (dict(mass="1e308"), "<mass>"),
    (dict(inertia='ixx="1e308" iyy="1e308" izz="1e308" ixy="0" ixz="0" iyz="0"'), "<inertia>"),
    (dict(xyz="1e200 0 0"), "<origin>"),
], ids=["mass 1e308", "inertia 1e308", "origin 1e200"])
def test_urdf_huge_values(tmp_path, kw, where):
    one_line_model_error(urdf(tmp_path, two_links(**kw)), where, f"{MAX_MAGNITUDE:g}")


# -- URDF: structure -------------------------------------------------------------------------
def test_urdf_self_loop(tmp_path):
    one_line_model_error(urdf(tmp_path, two_links() + joint("k", "b", "b")), "joint 'k' connects link 'b' to itself")


def test_urdf_cycle(tmp_path):
    body = link("a") + link("b") + link("c") + joint("j", "a", "b") + joint("k", "b", "c") + joint("l", "c", "b")
    one_line_model_error(urdf(tmp_path, body), "link 'b' is the child of two joints", "'j'", "'l'")


def test_urdf_cycle_without_root(tmp_path):
    body = link("a") + link("b") + joint("j", "a", "b") + joint("k", "b", "a")
    one_line_model_error(urdf(tmp_path, body), "expected one root link, found []", "cycle")


def test_urdf_dangling_cycle_names_the_lost_links(tmp_path):
    """c -> d -> c hangs from nothing: before, c and d were silently dropped."""
    body = two_links() + link("c") + link("d") + joint("k", "c", "d") + joint("l", "d", "c")
    one_line_model_error(urdf(tmp_path, body), "links ['c', 'd'] are not connected to the root link 'a'")


def test_urdf_duplicate_joint_names(tmp_path):
    body = link("a") + link("b") + link("c") + joint("j", "a", "b") + joint("j", "b", "c")
    one_line_model_error(urdf(tmp_path, body), "two <joint> elements are named 'j'")


def test_urdf_duplicate_link_names(tmp_path):
    one_line_model_error(urdf(tmp_path, two_links() + link("b")), "two <link> elements are named 'b'")


def test_urdf_without_robot_name(tmp_path):
    one_line_model_error(urdf(tmp_path, two_links(), name=None), "<robot> has no name attribute")


def chain_urdf(tmp_path, n):
    body = "".join(link(f"l{i}") for i in range(n + 1))
    body += "".join(joint(f"j{i:05d}", f"l{i}", f"l{i + 1}") for i in range(n))
    return urdf(tmp_path, body, name="long")


def test_urdf_chain_of_2000_links_loads(tmp_path):
    """The tree walk is iterative: 2,000 links (a RecursionError at ~1,000 before)."""
    robot = load_robot(str(chain_urdf(tmp_path, 2000)))
    assert robot.n_bodies == 2001 and robot.nv == 2006 and robot.depth() == 2001
    assert [b.parent for b in robot.bodies] == list(range(-1, 2000))


def test_urdf_mass_zero_keeps_its_rotational_inertia(tmp_path):
    """A zero-mass link welded to a body adds its rotational inertia (Bolt's feet): before, it
    was dropped."""
    foot = '<link name="foot"><inertial><mass value="0"/><inertia ixx="0.5" iyy="0.25" izz="0.125" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    body = two_links() + foot + joint("f", "b", "foot", kind="fixed")
    robot = load_robot(str(urdf(tmp_path, body)))
    b = robot.bodies[robot.frame("b").body]
    assert b.mass == 1.0
    assert np.allclose(np.diag(b.inertia), [0.6, 0.35, 0.225])


# -- the CLI: exit 2, one line ---------------------------------------------------------------
def test_cli_bad_models_exit_2_one_line(tmp_path):
    files = [urdf(tmp_path, two_links(xyz="nan 0 0"), file="nan.urdf"),
             urdf(tmp_path, two_links() + joint("k", "b", "b"), file="loop.urdf")]
    nb = tmp_path / "nb.json"
    nb.write_text('{"NB": 1e12, "parent": [0], "jtype": ["Rx"], "Xtree": [], "I": []}')
    for path in [*files, nb]:
        r = run_cli("count", path, "-c", "b:6d")
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


# -- spatial_v2 JSON -------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    '{"NB": 1e12, "parent": [0], "jtype": ["Rx"], "Xtree": [], "I": []}',
    '{"NB":1e12,"parent":0,"jtype":"Rx","Xtree":0,"I":0}',
    '{"NB": 1e12, "bodyNames": null, "parent": [0], "jtype": ["Rx"], "Xtree": [[0]], "I": [[0]]}',
], ids=["lists", "scalars", "null names"])
def test_spatial_v2_huge_nb_allocates_nothing(tmp_path, text):
    """A 90-byte file with NB = 1e12 allocated 23 GB before any check: the lists are checked
    against NB before anything is sized by it."""
    p = tmp_path / "nb.json"
    p.write_text(text)
    tracemalloc.start()
    try:
        one_line_model_error(p, "1000000000000")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000


def test_spatial_v2_huge_values(tmp_path):
    X = np.eye(6)
    inertia = np.diag([1.0, 1.0, 1.0, 1e300, 1e300, 1e300])
    p = tmp_path / "big.json"
    p.write_text(json.dumps({"NB": 1, "parent": [0], "jtype": ["Rx"], "Xtree": [X.tolist()], "I": [inertia.tolist()]}))
    one_line_model_error(p, "I of body 'body1'", f"{MAX_MAGNITUDE:g}")


def test_spatial_v2_non_finite_gravity(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"NB": 1, "parent": [0], "jtype": ["Rx"], "Xtree": [np.eye(6).tolist()],
                             "I": [np.eye(6).tolist()], "gravity": [0, 0, 1e300]}))
    one_line_model_error(p, "'gravity'")


# -- SDF -------------------------------------------------------------------------------------
def sdf(tmp_path, links, joints, file="model.sdf"):
    p = tmp_path / file
    p.write_text(f'<sdf version="1.6"><model name="m">{links}{joints}</model></sdf>')
    return p


def sdf_link(name, pose="0 0 0 0 0 0", mass="1"):
    return (f'<link name="{name}"><pose>{pose}</pose><inertial><mass>{mass}</mass>'
            f'<inertia><ixx>0.1</ixx><iyy>0.1</iyy><izz>0.1</izz></inertia></inertial></link>')


def sdf_joint(name, parent, child, kind="revolute", axis="0 0 1"):
    return (f'<joint name="{name}" type="{kind}"><parent>{parent}</parent><child>{child}</child>'
            f'<axis><xyz>{axis}</xyz></axis></joint>')


@pytest.mark.parametrize("links, joints, words", [
    (sdf_link("a") + sdf_link("b", pose="0 0 nan 0 0 0"), sdf_joint("j", "a", "b"), ["link 'b'", "non-finite"]),
    (sdf_link("a") + sdf_link("b", mass="inf"), sdf_joint("j", "a", "b"), ["<mass> of the inertial of link 'b'", "non-finite"]),
    (sdf_link("a") + sdf_link("b", mass="1e308"), sdf_joint("j", "a", "b"), ["<mass>", f"{MAX_MAGNITUDE:g}"]),
    (sdf_link("a") + sdf_link("b"), sdf_joint("j", "a", "b", axis="0 inf 1"), ["<axis><xyz> of joint 'j'", "non-finite"]),
    (sdf_link("a") + sdf_link("b"), sdf_joint("j", "a", "b") + sdf_joint("k", "b", "b"), ["joint 'k' connects link 'b' to itself"]),
    (sdf_link("a") + sdf_link("b") + sdf_link("c") + sdf_link("d"),
     sdf_joint("j", "a", "b") + sdf_joint("k", "c", "d") + sdf_joint("l", "d", "c"),
     ["links ['c', 'd'] are not connected to the root link 'a'"]),
    (sdf_link("a") + sdf_link("b"), sdf_joint("j", "a", "b") + sdf_joint("j", "a", "b"), ["two <joint> elements are named 'j'"]),
    (sdf_link("a") + sdf_link("b") + sdf_link("b"), sdf_joint("j", "a", "b"), ["two <link> elements are named 'b'"]),
], ids=["pose nan", "mass inf", "mass 1e308", "axis inf", "self-loop", "dangling cycle", "duplicate joint",
        "duplicate link"])
def test_sdf_bad_models(tmp_path, links, joints, words):
    one_line_model_error(sdf(tmp_path, links, joints), *words)


def test_sdf_chain_of_2000_links_loads(tmp_path):
    links = "".join(sdf_link(f"l{i}", pose=f"0 0 {0.1 * i:g} 0 0 0") for i in range(2001))
    joints = "".join(sdf_joint(f"j{i}", f"l{i}", f"l{i + 1}") for i in range(2000))
    robot = load_robot(str(sdf(tmp_path, links, joints)))
    assert robot.n_bodies == 2001 and [b.parent for b in robot.bodies] == list(range(-1, 2000))
