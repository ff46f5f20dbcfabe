"""Issue 13, point 5: a URDF named .xml goes to the URDF loader (its root element decides; a
<mujoco> root goes to the MJCF dispatch point, which says what it needs); a URDF given as a
string (``cd.load_robot(text)``) is told apart from paths and registry names, is named by its
<robot name>, and its output folder is hashed from its content."""
import shutil

import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.runtime.artifact import model_name
from casadi_delassus.errors import ModelError
from casadi_delassus.verify import reference

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
    # named by <robot name> plus a hash of the content: another text is another folder
    name = model_name(robot)
    assert name.startswith("go1_h") and name != "go1"
    changed = go1_text.replace('name="FL_foot_fixed"', 'name="FL_foot_fixed_2"')
    assert changed != go1_text and model_name(cd.load_robot(changed)) != name
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
