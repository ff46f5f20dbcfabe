"""MuJoCo's smooth dynamics of one MjModel over casadi.SX: the joint-space inertia M (the
package's CRBA, sweeps/joint_space.py, armature on the diagonal), qfrc_bias (the package's RNE,
sweeps/tree.py, at zero acceleration: Coriolis, centrifugal and gravity forces), qfrc_passive
(passive.py), qfrc_actuator and actuator_force (actuators.py), and

    qfrc_smooth = qfrc_passive + qfrc_actuator + qfrc_applied − qfrc_bias
    qacc_smooth = M⁻¹ qfrc_smooth                           (the package's ABA, dynamics/aba.py)

as MuJoCo's mj_fwdAcceleration forms them (MuJoCo's computation chapter, "Forward dynamics").
The Robot is model/mjcf.py's robot_from_mjmodel (q = qpos, v = qvel, MuJoCo's conventions;
MuJoCo's free joints move their body's origin in world coordinates, so M's rows and columns
of a free joint's translation are turned from the body axes the CRBA uses into the world's).
Quaternions in qpos are normalized first, as MuJoCo's kinematics normalizes its copy."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca

from ..dynamics.aba import solve as aba_solve
from ..sweeps.joint_space import mass_matrix as crba
from ..sweeps.tree import Tree, inverse_dynamics
from ..symbolic.frames import local_transforms
from . import actuators, passive
from .kinematics import normalized_q


def _free_rotation(robot, T):
    """{first dof: E (SX 3x3, world -> body)} for every free joint with MuJoCo's velocities."""
    return {b.v_index: T[i].X.E for i, b in enumerate(robot.bodies) if b.joint.mujoco_velocity}


def mass_matrix(model, q):
    """M (SX nv x nv, dense symmetric) at qpos q, armature included, in qvel's coordinates."""
    robot = model.robot
    T = local_transforms(robot, normalized_q(model.m, q))
    M = ca.SX(robot.nv, robot.nv)
    for (r, c), e in crba(robot, T).items():
        M[r, c] = e
        M[c, r] = e
    # qvel's free translation ṗ (world) is E ṗ in the body axes the CRBA takes: M ← Pᵀ M P
    for k, E in _free_rotation(robot, T).items():
        P = ca.SX.eye(robot.nv)
        P[k:k + 3, k:k + 3] = E
        M = ca.mtimes([P.T, M, P])
    # Pᵀ M P's entries (r, c) and (c, r) sum their products in other orders: one SX for both keeps M exactly
    # symmetric (the compiled rollout reads M's row c as its column c: templates/mujoco_rollout.c.j2 m_times)
    for r in range(robot.nv):
        for c in range(r):
            M[c, r] = M[r, c]
    return M


def bias_force(model, q, v):
    """qfrc_bias (SX nv): the RNE at zero joint acceleration, gravity included."""
    tree = Tree(model.robot, model.empty, normalized_q(model.m, q))
    return ca.vertcat(*inverse_dynamics(tree, v, ca.SX.zeros(model.nv, 1))[0])


def unconstrained_acceleration(model, q, v, tau):
    """M⁻¹ (tau − qfrc_bias) (SX nv) by ABA, tau in qvel's coordinates."""
    tree = Tree(model.robot, model.empty, normalized_q(model.m, q))
    vl, taul = tree.local_inputs(v, tau)
    qdd, _, _ = aba_solve(tree, vl, taul)
    return ca.vertcat(*tree.user_vdot([x for qi in qdd for x in qi], vl))


@dataclass
class Smooth:
    """The smooth quantities of one state as SX (MuJoCo's mjData names)."""
    M: ca.SX
    qfrc_bias: ca.SX
    qfrc_passive: ca.SX
    actuator_force: ca.SX
    qfrc_actuator: ca.SX
    qfrc_smooth: ca.SX
    qacc_smooth: ca.SX


def smooth(model, q, v, ctrl, qfrc_applied):
    """The Smooth of (qpos, qvel, ctrl, qfrc_applied), all SX."""
    m = model.m
    force = actuators.actuator_force(m, q, v, ctrl)
    fpass = passive.qfrc_passive(m, q, v)
    fact = actuators.qfrc_actuator(m, force)
    tau = fpass + fact + qfrc_applied
    bias = bias_force(model, q, v)
    return Smooth(mass_matrix(model, q), bias, fpass, force, fact, tau - bias,
                  unconstrained_acceleration(model, q, v, tau))


def smooth_function(model):
    """casadi.Function ``smooth(qpos, qvel, ctrl, qfrc_applied)`` -> Smooth's fields."""
    m = model.m
    q, v, u, f = ca.SX.sym("qpos", m.nq), ca.SX.sym("qvel", m.nv), ca.SX.sym("ctrl", m.nu), ca.SX.sym("qfrc_applied", m.nv)
    s = smooth(model, q, v, u, f)
    names = list(Smooth.__dataclass_fields__)
    return ca.Function("smooth", [q, v, u, f], [getattr(s, n) for n in names], ["qpos", "qvel", "ctrl", "qfrc_applied"], names)
