"""Shared pieces of the mujoco_model tests: the models (tests/models/ and installed packages), MuJoCo
set up as the oracle (Newton to a tiny tolerance), random states, and contacts from MuJoCo's own
collision detection (the constraint rows take contacts as input)."""
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

MODELS = Path(__file__).resolve().parents[1] / "models"
GYM = {name: ("gymnasium", f"gymnasium/envs/mujoco/assets/{name}.xml") for name in ("ant", "humanoid", "walker2d_v5", "hopper")}
ROBOSUITE = {name: ("robosuite-models", f"robosuite_models/assets/robots/{name}/robot.xml") for name in ("go2", "g1", "h1")}


def path_of(name):
    """The MJCF file of a test model: tests/models/<name>.xml, or a Gymnasium or robosuite-models file
    (skipped when its package is missing)."""
    if (MODELS / f"{name}.xml").is_file():
        return MODELS / f"{name}.xml"
    dist, rel = {**GYM, **ROBOSUITE}[name]
    try:
        return Path(importlib.metadata.distribution(dist).locate_file(rel))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed")


def load(name, cone=None, integrator=None, floor=None, tight=True):
    """The compiled model, MuJoCo's Newton solver run to 1e-15 (its answer is then the exact one);
    ``floor`` adds a ground plane as Menagerie's scene.xml does (robosuite-models' robots have none);
    the rig's actuator group 3 disabled (opt.disableactuator).  ``tight=False``: the solver as the file sets it."""
    path = path_of(name)
    if floor or (floor is None and name in ROBOSUITE):
        spec = mujoco.MjSpec.from_file(str(path))
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[10, 10, .1], name="scene_floor")
        m = spec.compile()
        if name in ROBOSUITE:
            m.opt.gravity[:] = [0, 0, -9.81]        # Go2's file sets no gravity: its scene does
    else:
        m = mujoco.MjModel.from_xml_path(str(path))
    if cone:
        m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    if integrator:
        m.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    if tight:
        m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = 1e-15, 1000, 200
    if name == "mjcf_rig":
        m.opt.disableactuator = 1 << 3
    return m


def random_state(m, d, rng, height=(0.0, 0.4), spread=0.1):
    """Random qpos (hinges and slides up to ``spread`` of their range beyond it, free bodies near
    the floor, random unit quaternions), qvel, ctrl (±1.5 ctrlrange) and qfrc_applied; then mj_forward."""
    mujoco.mj_resetData(m, d)
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] == 0:
            d.qpos[a:a + 2] = rng.normal(size=2) * 0.2
            d.qpos[a + 2] = rng.uniform(*height) + m.qpos0[a + 2] * (m.qpos0[a + 2] > 0.5)
            x = rng.normal(size=4) * 0.3 + [1, 0, 0, 0]
            d.qpos[a + 3:a + 7] = x / np.linalg.norm(x)
        elif m.jnt_type[j] == 1:
            x = rng.normal(size=4)
            d.qpos[a:a + 4] = x / np.linalg.norm(x)
        else:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-np.pi, np.pi)
            d.qpos[a] = rng.uniform(lo - spread * (hi - lo), hi + spread * (hi - lo))
    d.qvel[:] = rng.normal(size=m.nv)
    scale = np.abs(m.actuator_ctrlrange).max(axis=1) if m.nu else np.zeros(0)
    d.ctrl[:] = rng.uniform(-1.5, 1.5, m.nu) * np.where(scale > 0, scale, 1)
    d.qfrc_applied[:] = rng.normal(size=m.nv)
    mujoco.mj_forward(m, d)


def mujoco_contacts(m):
    """contacts(qpos): MuJoCo's contacts at qpos (its collision detection on a scratch MjData)."""
    from casadi_delassus.mujoco_model.constraints import contacts_from_data
    scratch = mujoco.MjData(m)

    def contacts(qpos):
        scratch.qpos[:] = qpos
        mujoco.mj_fwdPosition(m, scratch)
        return contacts_from_data(m, scratch)
    return contacts


def relative(a, b):
    """max |a − b| / max(|b|, tiny): the relative error the tests bound."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)) if b.size else 0.0
