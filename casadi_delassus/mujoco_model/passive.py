"""MuJoCo's passive joint forces (qfrc_passive) over casadi.SX: the joints' springs and the dofs'
dampers, each with its linear coefficient (MuJoCo's computation chapter, "Passive forces"; the
method of engine_passive.c's joint springs and dof dampers):

    hinge, slide:  −k (q − qpos_spring)
    ball:          −k · sub_quat(q, qpos_spring)     (the rotation from the spring pose, body frame)
    free:          −k (p − p_spring) on the translation, the ball's term on the rotation
    every dof:     −b q̇

Friction loss is a constraint (constraints.py), not a passive force.  The springs go with
``disableflags`` spring, the dampers with damper."""
from __future__ import annotations

import casadi as ca

from .flags import disabled
from .kinematics import BALL, FREE, normalized_q, sub_quat


def qfrc_spring(m, q):
    """The joints' spring forces (SX, nv) at qpos q."""
    out = [ca.SX(0)] * m.nv
    if disabled(m, "spring"):
        return ca.vertcat(*out)
    q = normalized_q(m, q)
    for j in range(m.njnt):
        k = float(m.jnt_stiffness[j])
        if k == 0:
            continue
        a, d, kind = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), int(m.jnt_type[j])
        if kind == FREE:
            for i in range(3):
                out[d + i] = -k * (q[a + i] - float(m.qpos_spring[a + i]))
            a, d = a + 3, d + 3
        if kind in (FREE, BALL):
            dif = sub_quat(q[a:a + 4], ca.DM(m.qpos_spring[a:a + 4]))
            for i in range(3):
                out[d + i] = -k * dif[i]
        else:
            out[d] = -k * (q[a] - float(m.qpos_spring[a]))
    return ca.vertcat(*out)


def qfrc_damper(m, v):
    """The dofs' damping forces −b q̇ (SX, nv)."""
    if disabled(m, "damper"):
        return ca.SX.zeros(m.nv, 1)
    return ca.vertcat(*[-float(b) * v[i] if b else ca.SX(0) for i, b in enumerate(m.dof_damping)])


def qfrc_passive(m, q, v):
    """qfrc_passive (SX, nv): springs and dampers."""
    return qfrc_spring(m, q) + qfrc_damper(m, v)
