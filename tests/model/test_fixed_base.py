"""Issue 13, point 1: --fixed-base/--floating-base on every command that takes a ROBOT, and
``load_robot(spec, floating_base=…)`` / ``cd.generate(…, floating_base=…)``: a URDF file
floats by default (ur5: nv 12), fixed it is Pinocchio's buildModelFromUrdf without a root
joint; the two builds never share an output folder; formats that set their base in the model
refuse the other one with one line."""
import numpy as np
import pytest

import casadi_delassus as cd
from casadi_delassus.runtime.artifact import model_name
from casadi_delassus.verify.check import check_delassus, relative_error

from cli_runner import run_cli as run
from conftest import model_for

pin = pytest.importorskip("pinocchio")


@pytest.fixture(scope="module")
def ur5_path():
    return model_for("erd:ur_description/urdf/ur5_robot.urdf").source


def test_load_robot_fixed_base_is_pinocchios_fixed_model(ur5_path):
    floating, fixed = cd.load_robot(ur5_path), cd.load_robot(ur5_path, floating_base=False)
    assert (floating.nq, floating.nv, fixed.nq, fixed.nv) == (13, 12, 6, 6)
    assert not fixed.floating_base and fixed.bodies[0].parent == -1
    model = pin.buildModelFromUrdf(ur5_path)
    data = model.createData()
    q = fixed.random_q(np.random.default_rng(0))
    from casadi_delassus.verify import reference
    M = pin.crba(model, data, q)
    assert relative_error(reference.mass_matrix(fixed, q), np.triu(M) + np.triu(M, 1).T) < 1e-10


def test_fixed_and_floating_never_share_a_folder(ur5_path):
    names = {model_name(cd.load_robot(ur5_path, floating_base=b)) for b in (None, True, False)}
    assert len(names) == 2                               # None and True are the same model
    fixed = model_name(cd.load_robot(ur5_path, floating_base=False))
    assert "_fixed_h" in fixed
    # registry robots: panda is fixed in its entry, talos floats
    assert model_name(cd.load_robot("panda")) == "panda" == model_name(cd.load_robot("panda", floating_base=False))
    assert model_name(cd.load_robot("panda", floating_base=True)).startswith("panda_floating_h")
    assert model_name(cd.load_robot("talos", floating_base=False)).startswith("talos_fixed_h")


def test_cli_fixed_base_count_generate_check(tmp_path, ur5_path):
    r = run("count", ur5_path, "--fixed-base", "-c", "ee_link:6d", "-a", "pv_osim", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"nv": 6' in r.stdout
    r = run("count", ur5_path, "-c", "ee_link:6d", "-a", "pv_osim", "--format", "json")
    assert '"nv": 12' in r.stdout
    for flag in ("--fixed-base", "--floating-base"):
        r = run("generate", ur5_path, flag, "-c", "ee_link:6d", "-a", "pv_osim", "-o", str(tmp_path))
        assert r.returncode == 0, r.stderr
    folders = sorted(p.parent.parent.name for p in tmp_path.rglob("pv_osim.json"))
    assert len(folders) == 2 and any("_fixed_h" in f for f in folders)
    fixed = next(p for p in tmp_path.rglob("pv_osim.json") if "_fixed_h" in str(p))
    f = cd.load(fixed)
    assert f.manifest["inputs"][0]["shape"] == [6]
    r = run("check", ur5_path, "--fixed-base", "-c", "ee_link:6d", "-a", "pv_osim", "-o", str(tmp_path), "--samples", "10")
    assert r.returncode == 0, r.stderr


def test_python_generate_takes_floating_base(tmp_path, ur5_path):
    f = cd.generate(ur5_path, ["ee_link:6d"], "pv_osim", out_dir=tmp_path, floating_base=False)
    assert f.robot.nv == 6 and "_fixed_h" in str(f.so_path)
    assert check_delassus(f, f.robot, f.constraints, samples=10) <= 1e-10


@pytest.mark.parametrize("args, words", [
    (["count", "cassie", "--fixed-base"], "registry robot 'cassie' has a floating base set in the model"),
    (["count", "chain:n=3", "--floating-base"], "set floating=0 or floating=1 in the spec"),
    (["check", "registry", "--fixed-base"], "not with 'check registry'"),
])
def test_bases_a_format_cannot_change_are_one_line(args, words):
    r = run(*args)
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_every_robot_command_takes_the_base_flags():
    for command in ("count", "generate", "check", "bench", "links"):
        r = run(command, "--help")
        assert "--fixed-base / --floating-base" in r.stdout, command


def test_a_worker_rebuilds_the_fixed_build(tmp_path, ur5_path):
    """The manifest records the base, so codegen.rebuild makes the same function."""
    from casadi_delassus.codegen.rebuild import rebuild
    f = cd.generate(ur5_path, ["ee_link:6d"], "pv_osim", out_dir=tmp_path / "a", floating_base=False)
    assert f.manifest["floating_base"] is False
    g = cd.load(rebuild(f.manifest, tmp_path / "b"))
    assert g.manifest["function"] == f.manifest["function"] and g.manifest["nv"] == 6


def test_the_base_is_stated_everywhere(tmp_path):
    """A URDF arm floats by default (a free joint at its root): every command's first line, the
    manifest and the Robot's repr say which base it has and how to change it."""
    from xml.sax.saxutils import quoteattr
    links = "".join(f'<link name="{n}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" '
                    f'ixy="0" ixz="0" iyz="0"/></inertial></link>' for n in ("base", "l1"))
    urdf = tmp_path / "model.urdf"
    urdf.write_text(f'<robot name={quoteattr("arm")}>{links}<joint name="j1" type="revolute"><parent link="base"/>'
                    '<child link="l1"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
                    '</joint></robot>')
    for args in (["links", urdf], ["count", urdf, "-c", "l1:3d", "-a", "naive"],
                 ["generate", urdf, "-c", "l1:3d", "-a", "naive", "-o", tmp_path / "out"],
                 ["check", urdf, "-c", "l1:3d", "-a", "naive", "--samples", "3", "-o", tmp_path / "out"]):
        r = run(*args)
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert "floating base" in first and "--fixed-base" in first, (args[0], first)
    fixed = run("count", urdf, "--fixed-base", "-c", "l1:3d", "-a", "naive")
    assert "fixed base" in fixed.stdout.splitlines()[0] and "--floating-base" in fixed.stdout.splitlines()[0]
    manifest = cd.load(next((tmp_path / "out").rglob("naive.json"))).manifest
    assert "floating base" in manifest["base"] and "--fixed-base" in manifest["base"]
    assert "floating_base=False" in repr(cd.load_robot(str(urdf)))
    assert "floating_base=True" in repr(cd.load_robot(str(urdf), floating_base=False))
