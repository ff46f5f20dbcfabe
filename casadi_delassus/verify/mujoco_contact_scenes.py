"""Scenes for checking the MuJoCo contact step (mujoco_model/soft_step.py) against MuJoCo itself:
gymnasium's ant and robosuite-models' Go2 on a ground plane, standing and sliding, with MuJoCo's
Newton solver run to a tiny tolerance so that its efc_force and qacc are the exact answer."""
from __future__ import annotations

import importlib.metadata

import numpy as np

from ..errors import ModelError
from ..model.mjcf import mujoco_module

FILES = {"ant": ("gymnasium", "gymnasium/envs/mujoco/assets/ant.xml"),
         "go2": ("robosuite-models", "robosuite_models/assets/robots/go2/robot.xml")}


def scene_path(robot):
    """The MJCF file of ``robot`` ("ant" or "go2") inside its installed package."""
    dist, rel = FILES[robot]
    try:
        return str(importlib.metadata.distribution(dist).locate_file(rel))
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"{robot}: the package {dist} is not installed") from None


def scene(robot, cone, condim=None, pair=False):
    """The robot on a ground plane under gravity with contacts only (no actuators, joint limits,
    friction loss, damping or springs: the step models contacts), ``cone`` "elliptic" or
    "pyramidal", every geom's condim ``condim`` (None: the model's own; Go2's feet are condim 6),
    MuJoCo's Newton solver run to 1e-15.  ``pair``: Go2's FR foot touches the floor through an
    explicit contact pair instead (condim 3, its own friction and solreffriction)."""
    mujoco = mujoco_module()
    spec = mujoco.MjSpec.from_file(scene_path(robot))
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.geoms):
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[10, 10, .1], name="floor")
    for g in spec.geoms:
        g.condim = condim or g.condim
    if pair:
        spec.add_pair(geomname1="floor", geomname2="FR", condim=3, solreffriction=[0.05, 0.7],
                      friction=[0.7, 0.7, 0.005, 1e-4, 1e-4])
    m = spec.compile()
    m.opt.gravity[:] = [0, 0, -9.81]
    m.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    m.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    m.opt.tolerance, m.opt.iterations, m.opt.ls_iterations = 1e-15, 1000, 200
    off = mujoco.mjtDisableBit
    m.opt.disableflags |= (off.mjDSBL_FRICTIONLOSS | off.mjDSBL_LIMIT | off.mjDSBL_DAMPER | off.mjDSBL_SPRING
                           | off.mjDSBL_ACTUATION)
    return m


def _lowest(m, d, g):
    """The lowest z of geom g (a sphere or a capsule)."""
    mujoco = mujoco_module()
    z = d.geom_xpos[g][2] - m.geom_size[g][0]
    if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE:
        z -= abs(d.geom_xmat[g].reshape(3, 3)[2, 2]) * m.geom_size[g][1]
    return z


def _touch(m, d, depth):
    """Lower the base so that the highest of the four lowest geoms is ``depth`` into the ground."""
    mujoco = mujoco_module()
    mujoco.mj_forward(m, d)
    low = sorted(_lowest(m, d, g) for g in range(m.ngeom) if m.geom_bodyid[g] > 0 and m.geom_contype[g])[:4]
    d.qpos[2] -= low[-1] + depth


def state(m, robot, kind, seed=0):
    """MjData after mj_forward, four feet touching, a small random qfrc_applied on the joints.
    ``kind``: "standing" (the feet 1 mm into the ground, at rest), "sliding" (the same pose, the
    base moving at (0.5, 0.2) m/s: same contacts, so one compiled step serves both) or "moved"
    (joint angles and the base's tilt perturbed, random velocities, the highest foot 0.5 mm in)."""
    mujoco = mujoco_module()
    d = mujoco.MjData(m)
    if robot == "go2":
        d.qpos[:] = m.key("home").qpos
    else:
        d.qpos[7:15] = [0, 1, 0, -1, 0, -1, 0, 1]        # ankles bent down: the four feet touch
    rng = np.random.default_rng(seed)
    d.qfrc_applied[6:] = rng.normal(scale=0.5, size=m.nv - 6)
    if kind == "moved":
        d.qpos[7:] += rng.normal(scale=0.05, size=m.nq - 7)
        d.qpos[3:7] += [0, 0.02, -0.03, 0]
        d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
        d.qvel[:] = rng.normal(scale=0.3, size=m.nv)
    _touch(m, d, 5e-4 if kind == "moved" else 1e-3)
    if kind == "sliding":
        d.qvel[:2] = [0.5, 0.2]
    mujoco.mj_forward(m, d)
    return d
