"""MuJoCo as the outside oracle for MJCF models: its own compile of the file, its own kinematics
and mass matrix, with q = ``data.qpos`` and v = ``data.qvel`` as the MJCF loader's Robot takes.

- ``delassus(model, specs, qpos)``: J M⁻¹ Jᵀ with M from ``mj_fullM`` (armature included) and
  J from ``mj_jac`` at the frame's point, rotated into the frame (our ``LINK:3d[@x,y,z]`` rows:
  the point's velocity along the frame's axes; ``LINK:6d``: [linear; angular] in the frame).
  A frame is a MuJoCo site or body of that name (a body: MuJoCo's body frame, ``xpos``/``xmat``;
  an unnamed body is ``body<id>``, as the loader names it).
- ``forward(model, qpos, qvel, tau)``: MuJoCo's ``qacc`` with ``qfrc_applied`` = τ and nothing
  else acting but gravity: constraints (contacts, equalities, limits, friction loss), passive
  forces (springs, damping, gravity compensation, fluid) and actuators are disabled.

``model`` is an MJCF path or an ``MjModel``.  Needs the ``mujoco`` package (the ``mjcf`` and
``test`` extras)."""
from __future__ import annotations

import copy
import functools

import numpy as np

from ..errors import ConstraintError
from ..model.mjcf import body_id, compile_mjcf, mujoco_module
from .pinocchio_oracle import frame_spec


@functools.lru_cache(maxsize=16)
def _compiled(path):
    return dynamics_only(compile_mjcf(path))


def _model(model):
    """The dynamics-only MjModel of an MJCF path (compiled once per path) or of an MjModel (a copy)."""
    mujoco = mujoco_module()
    return dynamics_only(model) if isinstance(model, mujoco.MjModel) else _compiled(str(model))


def dynamics_only(model):
    """A copy of ``model`` whose forward dynamics is M v̇ = τ − bias: every constraint, passive
    force and actuator disabled (gravity kept as the model has it)."""
    mujoco = mujoco_module()
    out = copy.deepcopy(model)
    d = mujoco.mjtDisableBit
    for bit in (d.mjDSBL_CONSTRAINT, d.mjDSBL_CONTACT, d.mjDSBL_EQUALITY, d.mjDSBL_LIMIT, d.mjDSBL_FRICTIONLOSS,
                d.mjDSBL_SPRING, d.mjDSBL_DAMPER, d.mjDSBL_ACTUATION):
        out.opt.disableflags |= int(bit)
    out.body_gravcomp[:] = 0
    out.opt.density = out.opt.viscosity = 0.0
    out.opt.wind[:] = 0
    return out


def _state(model, qpos, qvel=None):
    mujoco = mujoco_module()
    data = mujoco.MjData(model)
    data.qpos[:] = np.asarray(qpos, float).reshape(-1)
    if qvel is not None:
        data.qvel[:] = np.asarray(qvel, float).reshape(-1)
    return mujoco, data


def mass_matrix(model, qpos):
    """MuJoCo's joint-space inertia M(qpos) (``mj_fullM``; ``dof_armature`` on its diagonal)."""
    model = _model(model)
    mujoco, data = _state(model, qpos)
    mujoco.mj_forward(model, data)
    M = np.zeros((model.nv, model.nv))
    try:
        mujoco.mj_fullM(model, data, M)             # newer MuJoCo: from MjData (data.M)
    except TypeError:
        mujoco.mj_fullM(model, M, data.qM)          # earlier: the sparse qM
    return M


def _frame(mujoco, model, data, name):
    """(body id, origin, rotation with the frame's axes as columns) of a site or body, world."""
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    if site >= 0:
        return int(model.site_bodyid[site]), data.site_xpos[site].copy(), data.site_xmat[site].reshape(3, 3).copy()
    body = body_id(model, name)
    if body < 0:
        raise ConstraintError(f"MuJoCo has no site or body named {name!r}")
    return body, data.xpos[body].copy(), data.xmat[body].reshape(3, 3).copy()


def jacobian(model, specs, qpos):
    """The stacked rows of ``LINK:3d[@x,y,z]`` / ``LINK:6d`` specs at qpos, from MuJoCo."""
    model = _model(model)
    mujoco, data = _state(model, qpos)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    rows = []
    for spec in specs:
        parsed = frame_spec(spec)
        if parsed is None:
            raise ConstraintError(f"the MuJoCo oracle takes LINK:3d[@x,y,z] and LINK:6d constraints, not {spec!r}")
        kind, name, offset = parsed
        body, origin, R = _frame(mujoco, model, data, name)
        jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
        mujoco.mj_jac(model, data, jacp, jacr, origin + R @ np.asarray(offset, float), body)
        rows += [R.T @ jacp] if kind == "3d" else [R.T @ jacp, R.T @ jacr]
    return np.vstack(rows)


def delassus(model, specs, qpos):
    """MuJoCo's J M⁻¹ Jᵀ for the constraints ``specs`` at ``qpos``."""
    model = _model(model)
    J = jacobian(model, specs, qpos)
    return J @ np.linalg.solve(mass_matrix(model, qpos), J.T)


def forward(model, qpos, qvel, tau):
    """MuJoCo's qacc at (qpos, qvel) with ``qfrc_applied`` = τ and no constraints, passive forces
    or actuators (``mj_forward``)."""
    model = _model(model)
    mujoco, data = _state(model, qpos, qvel)
    data.qfrc_applied[:] = np.asarray(tau, float).reshape(-1)
    mujoco.mj_forward(model, data)
    return data.qacc.copy()
