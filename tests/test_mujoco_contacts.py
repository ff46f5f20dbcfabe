"""MuJoCo's soft contact model on the compiled step (contact/mujoco_step.py): efc_force and qacc
equal MuJoCo's own after mj_forward (Newton to a tiny tolerance), standing and sliding, both cones."""
import importlib.metadata

import numpy as np
import pytest

from casadi_delassus.contact import mujoco_soft
from casadi_delassus.contact.mujoco_step import mujoco_contact_step, mujoco_contacts, soft_parameters
from casadi_delassus.errors import ConstraintError

mujoco = pytest.importorskip("mujoco")


def scene_path(robot):
    """The MJCF file of ``robot`` (gymnasium's ant, robosuite-models' Go2)."""
    dist, rel = {"ant": ("gymnasium", "gymnasium/envs/mujoco/assets/ant.xml"),
                 "go2": ("robosuite-models", "robosuite_models/assets/robots/go2/robot.xml")}[robot]
    try:
        return str(importlib.metadata.distribution(dist).locate_file(rel))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed")


def scene(robot, cone):
    """The robot on a ground plane under gravity, contacts only (no actuators, joint limits,
    friction loss, damping or springs), condim-6 feet made condim 3, MuJoCo's Newton solver run
    to 1e-15."""
    spec = mujoco.MjSpec.from_file(scene_path(robot))
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.geoms):
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[10, 10, .1], name="floor")
    for g in spec.geoms:
        g.condim = 3 if g.condim == 6 else g.condim
    m = spec.compile()
    m.opt.gravity[:] = [0, 0, -9.81]
    m.opt.cone = cone
    m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = 1e-15, 1000, 200
    off = mujoco.mjtDisableBit
    m.opt.disableflags |= (off.mjDSBL_FRICTIONLOSS | off.mjDSBL_LIMIT | off.mjDSBL_DAMPER | off.mjDSBL_SPRING
                           | off.mjDSBL_ACTUATION)
    return m


def lowest(m, d, g):
    """The lowest z of geom g (a sphere or a capsule)."""
    z = d.geom_xpos[g][2] - m.geom_size[g][0]
    if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE:
        z -= abs(d.geom_xmat[g].reshape(3, 3)[2, 2]) * m.geom_size[g][1]
    return z


def state(m, robot, sliding, seed=0):
    """Standing: the feet 1 mm into the ground, at rest, under a small random qfrc_applied on the
    joints; sliding: the same pose with the base moving at (0.5, 0.2) m/s."""
    d = mujoco.MjData(m)
    if robot == "go2":
        d.qpos[:] = m.key("home").qpos
    else:
        d.qpos[7:15] = [0, 1, 0, -1, 0, -1, 0, 1]        # ankles bent down: the four feet touch
    mujoco.mj_forward(m, d)
    d.qpos[2] -= min(lowest(m, d, g) for g in range(m.ngeom) if m.geom_bodyid[g] > 0 and m.geom_contype[g]) + 1e-3
    d.qfrc_applied[6:] = np.random.default_rng(seed).normal(scale=0.5, size=m.nv - 6)
    if sliding:
        d.qvel[:2] = [0.5, 0.2]
    mujoco.mj_forward(m, d)
    return d


def relative(a, b):
    """max |a − b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def go2_step(tmp_path_factory):
    """One compiled step for go2's four feet (the same pose standing and sliding)."""
    m = scene("go2", mujoco.mjtCone.mjCONE_ELLIPTIC)
    specs = mujoco_contacts(m, state(m, "go2", False)).specs
    return mujoco_contact_step(m, specs, out_dir=tmp_path_factory.mktemp("mjsoft"), cflags=["-O1"])


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
@pytest.mark.parametrize("sliding", [False, True])
def test_go2_equals_mujoco(go2_step, cone, sliding):
    m = scene("go2", getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}"))
    d = state(m, "go2", sliding)
    assert d.ncon == 4 and d.solver_niter[0] < m.opt.iterations
    r = go2_step.solve(m, d)
    assert r.status == "converged"
    assert relative(r.force, d.efc_force) <= 1e-6
    assert relative(r.qacc, d.qacc) <= 1e-6
    if sliding:         # the feet slide: friction on the cone's boundary, not the sticking answer
        assert relative(r.qacc, d.qacc_smooth) > 1e-3


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_parameters_equal_mujoco(cone):
    """R and a_ref from solref/solimp/impratio equal MuJoCo's efc_R and efc_aref; the efc rows its efc_J."""
    m = scene("go2", getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}"))
    d = state(m, "go2", True)
    c = mujoco_contacts(m, d)
    pyramidal = cone == "pyramidal"
    R, B, Kr = soft_parameters(m, c, pyramidal)
    E = mujoco_soft.efc_rows(c.frames, c.mu, pyramidal)
    Jp = np.zeros((3, m.nv))
    rows = []
    for i in range(d.ncon):
        b = m.geom_bodyid[d.contact[i].geom].max()
        mujoco.mj_jac(m, d, Jp, None, d.contact[i].pos, b)
        rows.append(E[i] @ Jp)
    J = np.vstack(rows)
    assert np.allclose(J, d.efc_J.reshape(d.nefc, m.nv), rtol=0, atol=1e-12)
    assert relative(R, d.efc_R) <= 1e-12
    assert relative(-B * (J @ d.qvel) - Kr, d.efc_aref) <= 1e-12


def test_impedance_shape():
    """d(r) runs from d0 at r = 0 to d_width at |r| ≥ width, symmetric in r, clamped to [1e-4, 0.9999]."""
    solimp = [[0.9, 0.95, 0.001, 0.5, 2]] * 4
    d = mujoco_soft.impedance([0, 1e-3, -2e-3, 5e-4], solimp)
    assert np.allclose(d, [0.9, 0.95, 0.95, 0.925])
    assert mujoco_soft.impedance([0], [[0, 1, 0.1, 0.5, 2]])[0] == 1e-4


def test_rejects_condim6():
    spec = mujoco.MjSpec.from_file(scene_path("go2"))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[10, 10, .1])
    m = spec.compile()
    d = mujoco.MjData(m)
    d.qpos[:] = m.key("home").qpos
    d.qpos[2] = 0.2
    mujoco.mj_forward(m, d)
    assert d.ncon > 0
    with pytest.raises(ConstraintError, match="condim"):
        mujoco_contacts(m, d)
