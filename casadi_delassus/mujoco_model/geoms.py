"""Where each geom of an MjModel sits on our Robot, and its world pose as SX of q.

MuJoCo places a geom on its body by ``geom_pos``/``geom_quat`` and moves it with the body
(MuJoCo's documentation, "Computation/Forward kinematics"; engine_core_smooth.c, mj_kinematics:
the geom's world position is the body's plus the body rotation times ``geom_pos``, its world
rotation the body rotation times the geom's).  The Robot of model/mjcf.py keeps every moving
MuJoCo body's frame as a named frame (the body's name) on the body it moves with, the same
placement its sites get; so a geom on a moving body is that frame composed with the geom's
offset.  A geom on a body welded to the world (the floor, static obstacles) never moves: its
pose is MuJoCo's own ``geom_xpos``/``geom_xmat``, the same at every qpos.  Mocap bodies move
outside q: their geoms are refused where they could collide (mujoco_model/pairs.py).

Poses are (R, p): R (3 x 3) maps the geom's coordinates to the world's, p is its origin.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..model.mjcf import body_name, mujoco_module
from ..model.robot import clean, clean_rotation
from ..symbolic.frames import local_transforms


@dataclass(frozen=True)
class GeomPlacement:
    """A geom fixed to our body ``body`` (-1: to the world) with its axes ``rotation`` (columns)
    and origin ``translation`` in that body's coordinates (the world's for -1)."""
    body: int
    rotation: np.ndarray
    translation: np.ndarray


def _quat_matrix(quat):
    """The rotation matrix of MuJoCo's unit quaternion (w, x, y, z)."""
    mat = np.zeros(9)
    mujoco_module().mju_quat2Mat(mat, np.asarray(quat, float))
    return mat.reshape(3, 3)


def geom_placements(model, robot, geoms=None):
    """{g: GeomPlacement} for ``geoms`` (default all) of ``model`` on ``robot`` =
    robot_from_mjmodel(model, ...)."""
    mujoco = mujoco_module()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)          # static geoms: their pose at any qpos
    out = {}
    for g in range(model.ngeom) if geoms is None else geoms:
        b = int(model.geom_bodyid[g])
        if int(model.body_weldid[b]) == 0:
            out[g] = GeomPlacement(-1, data.geom_xmat[g].reshape(3, 3).copy(), data.geom_xpos[g].copy())
            continue
        frame = robot.frames[body_name(model, b)]
        E = _quat_matrix(model.geom_quat[g])
        out[g] = GeomPlacement(frame.body, clean_rotation(frame.rotation @ E),
                               clean(frame.translation + frame.rotation @ np.asarray(model.geom_pos[g], float)))
    return out


def body_poses(robot, q, bodies):
    """{i: (R_i, p_i)} (SX) of ``bodies`` and their ancestors: R_i maps body-i coordinates to the
    world's, p_i is its origin, from the local transforms ^iX_λ(i) (symbolic/frames.py), each
    ancestor's product once."""
    T = local_transforms(robot, q)
    out = {}
    for i in sorted({a for b in bodies for a in robot.ancestors(b)}):      # parents precede children
        E, r = T[i].X.E, T[i].X.r
        p = robot.parent(i)
        out[i] = (E.T, r) if p < 0 else (ca.mtimes(out[p][0], E.T), out[p][1] + ca.mtimes(out[p][0], r))
    return out


def geom_poses(robot, placements, q):
    """{g: (R, p)} world poses of the placed geoms, SX of q (numpy for geoms fixed to the world)."""
    bodies = body_poses(robot, q, sorted({pl.body for pl in placements.values() if pl.body >= 0}))
    out = {}
    for g, pl in placements.items():
        if pl.body < 0:
            out[g] = (pl.rotation, pl.translation)
        else:
            R, p = bodies[pl.body]
            out[g] = (ca.mtimes(R, ca.DM(pl.rotation)), p + ca.mtimes(R, ca.DM(pl.translation)))
    return out
