"""Issue 13, point 5: a URDF named .xml goes to the URDF loader (its root element decides; a
<mujoco> root goes to the MJCF dispatch point, which says what it needs); a URDF given as a
string (``cd.load_robot(text)``) is told apart from paths and registry names, is named by its
<robot name>, and its output folder is hashed from its content."""
import re
import shutil

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.runtime.artifact import model_name
from casadi_delassus.errors import ModelError
from casadi_delassus.verify import reference

from cli_runner import run_cli
from conftest import model_for

MJCF = """<mujoco model="m"><worldbody><body name="b"><joint name="j" type="hinge"/>
<geom size="0.1" type="sphere"/></body></worldbody></mujoco>"""


@pytest.fixture(scope="module")
def go1_text():
    return open(model_for("go1").source).read()


def same_model(a, b):
    q = a.random_q(np.random.default_rng(1))
    return a.describe()["bodies"] == b.describe()["bodies"] and \
        np.allclose(reference.mass_matrix(a, q), reference.mass_matrix(b, q), rtol=0, atol=0)


def test_urdf_named_xml(tmp_path):
    src = model_for("go1").source
    xml = tmp_path / "go1_copy.xml"
    shutil.copy(src, xml)
    robot = cd.load_robot(str(xml))
    assert robot.model_format == "urdf" and same_model(robot, cd.load_robot(src))
    assert cd.load_robot(str(xml), floating_base=False).nv == 12


def test_mjcf_root_reaches_the_mjcf_dispatch(tmp_path, go1_text):
    path = tmp_path / "model.xml"
    path.write_text(MJCF)
    pytest.importorskip("mujoco")
    for robot in (cd.load_robot(str(path)), cd.load_robot(MJCF)):      # a file and the same text
        assert robot.model_format == "mjcf" and robot.nv == 1 and "b" in robot.frames
    other = tmp_path / "other.xml"
    other.write_text("<scene/>")
    with pytest.raises(ModelError, match=r"root element is <scene>"):
        cd.load_robot(str(other))
    broken = tmp_path / "broken.xml"
    broken.write_text("<robot")
    with pytest.raises(ModelError, match="malformed model file"):
        cd.load_robot(str(broken))


def test_urdf_text(go1_text):
    robot = cd.load_robot(go1_text)
    assert robot.name == "go1" and robot.model_format == "urdf"
    assert same_model(robot, cd.load_robot(model_for("go1").source))
    assert robot.model_text == go1_text.lstrip()
    # named by <robot name> plus a hash of what dynamics reads: another model is another folder,
    # a renamed fixed joint (merged away) is the same model
    name = model_name(robot)
    assert name.startswith("go1_h") and name != "go1"
    renamed = go1_text.replace('name="FL_foot_fixed"', 'name="FL_foot_fixed_2"')
    assert renamed != go1_text and model_name(cd.load_robot(renamed)) == name
    mass = re.search(r'<mass value="([^"]+)"', go1_text)
    changed = go1_text[:mass.start(1)] + str(2 * float(mass.group(1))) + go1_text[mass.end(1):]
    assert model_name(cd.load_robot(changed)) != name
    assert model_name(cd.load_robot("  \n" + go1_text)) == name          # leading whitespace is not content
    assert model_name(cd.load_robot(go1_text, floating_base=False)) not in (name, "go1")


def test_urdf_text_errors_name_the_text():
    with pytest.raises(ModelError, match="malformed URDF <URDF text>: <robot> has no name"):
        cd.load_robot("<robot><link name='a'/></robot>")
    with pytest.raises(ModelError, match="malformed URDF <URDF text>: no element found"):
        cd.load_robot("<robot name='x'>")
    with pytest.raises(ModelError, match="not <sdf>"):
        cd.load_robot("<sdf/>")


def test_text_is_not_a_path_or_a_name(tmp_path, monkeypatch):
    """A file named like a registry robot or a text-looking name is never read as text."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match="unknown robot 'go1.urdfx'"):
        cd.load_robot("go1.urdfx")
    assert cd.load_robot("go1").model_format == "urdf" and not hasattr(cd.load_robot("go1"), "model_text")


def test_generate_from_text_and_check_with_pinocchio(tmp_path, go1_text):
    """The Pinocchio oracle reads the text itself (buildModelFromXML)."""
    pytest.importorskip("pinocchio")
    f = cd.generate(go1_text, ["FL_foot:3d", "RR_foot:3d-world"], "pv_osim", out_dir=tmp_path)
    assert f.so_path.parent.parent.name.startswith("go1_h")
    out = cd.check(f, oracles="pinocchio", samples=10)["pinocchio"]
    assert out.passed and out["delassus"].error < 1e-12
    assert out.notes == ["Pinocchio's own parse of the URDF text"]


TWO_LINKS = ('<link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" '
             'ixz="0" iyz="0"/></inertial>{geometry}</link><link name="l1"><inertial><mass value="1"/><inertia '
             'ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="j1" '
             'type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" '
             'effort="1" velocity="1"/></joint>')


def test_xml_version_0_0_is_read_without_noise(tmp_path):
    """Minitaur's <?xml version="0.0"?>: the model is read and nothing is said about it
    (yourdfpy's two log lines about its parser fallback are not the user's business)."""
    urdf = tmp_path / "v.urdf"
    urdf.write_text('<?xml version="0.0" ?>\n<robot name="vee">' + TWO_LINKS.format(geometry="") + "</robot>")
    r = run_cli("links", urdf)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("vee: nq = 8")


def test_geometry_it_cannot_parse_is_ignored_with_a_note_naming_the_link(tmp_path):
    """A <capsule> collision (pybullet's files): dynamics needs no geometry, so the model is
    read as without it, with one line on stderr naming the link and the shape."""
    capsule = '<collision><geometry><capsule radius="0.1" length="0.3"/></geometry></collision>'
    urdf = tmp_path / "cap.urdf"
    urdf.write_text('<robot name="cap">' + TWO_LINKS.format(geometry=capsule) + "</robot>")
    plain = tmp_path / "plain.urdf"
    plain.write_text('<robot name="cap">' + TWO_LINKS.format(geometry="") + "</robot>")
    r = run_cli("links", urdf)
    assert r.returncode == 0, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "link 'base'" in r.stderr and "capsule" in r.stderr, r.stderr
    assert cd.load_robot(str(urdf)).fingerprint() == cd.load_robot(str(plain)).fingerprint()


def test_sdf_with_one_model_inside_a_world(tmp_path):
    """<sdf><world><model>…</model></world></sdf> (how Gazebo saves one) is the model; a world
    of two models is refused naming them."""
    link = "<link name='{}'><inertial><mass>1</mass></inertial></link>"
    body = link.format("a") + link.format("b") + ("<joint name='j' type='revolute'><parent>a</parent><child>b</child>"
                                                  "<axis><xyz>0 0 1</xyz></axis></joint>")
    alone, world, two = tmp_path / "alone.sdf", tmp_path / "world.sdf", tmp_path / "two.sdf"
    alone.write_text(f'<sdf version="1.6"><model name="m">{body}</model></sdf>')
    world.write_text(f'<sdf version="1.6"><world name="default"><include><uri>model://ground_plane</uri></include>'
                     f'<model name="m">{body}</model></world></sdf>')
    two.write_text(f'<sdf version="1.6"><world name="w"><model name="m">{body}</model>'
                   f'<model name="n">{body}</model></world></sdf>')
    assert cd.load_robot(str(world)).fingerprint() == cd.load_robot(str(alone)).fingerprint()
    with pytest.raises(ModelError, match="2 models.*'m', 'n'"):
        cd.load_robot(str(two))
