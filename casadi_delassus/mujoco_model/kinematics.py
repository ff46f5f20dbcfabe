"""MuJoCo's forward kinematics over casadi.SX, in the world frame as MuJoCo keeps it (MuJoCo's
computation chapter, "Kinematics"; the method of engine_core_smooth.c's mj_kinematics, mj_comPos
and mj_comVel, written anew):

- bodies in MuJoCo's order: a body's frame starts at its parent's frame moved by (body_pos,
  body_quat); its joints then act in order, each at its anchor R·jnt_pos + x: a slide moves
  the frame by axis·(q − qpos0), a hinge turns it by the angle q − qpos0 about its axis, a ball
  by its (normalized) quaternion, both about the anchor; a free joint is the pose itself.
  Orientations are kept as quaternions (w, x, y, z) multiplied along the chain, as MuJoCo does,
  so that what reads a quaternion's sign (the weld's error, framequat) agrees with it;
- every dof is a twist s = (a, c) in world coordinates about the world origin: a point p of a
  body it moves goes at c + a × p per unit of the dof's velocity.  A hinge turns about its
  world axis a through its anchor x (c = x × a), a slide moves along its world axis (a = 0); a
  ball's and a free joint's rotational dofs turn about the body's own axes (the columns of its
  final rotation: qvel is the body-frame angular velocity) through the anchor, a free joint's
  translational dofs move along the world axes;
- a point Jacobian sums the twists of the dofs on the body's path to the world; velocities
  V = Σ s q̇, and accelerations Σ (s q̈ + ṡ q̇) with ṡ = V × s (V the velocity of the frame the
  dof's axis is fixed in; a free joint's translation axes are the world's: ṡ = 0).

Quaternions of qpos are normalized first (MuJoCo normalizes a copy the same way)."""
from __future__ import annotations

import casadi as ca
import numpy as np

FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3
NV = {FREE: 6, BALL: 3, SLIDE: 1, HINGE: 1}


# -- quaternions (w, x, y, z) as SX columns ------------------------------------------------------
def quat_mul(a, b):
    """The Hamilton product a ⊗ b."""
    aw, av, bw, bv = a[0], a[1:4], b[0], b[1:4]
    return ca.vertcat(aw * bw - ca.dot(av, bv), aw * bv + bw * av + ca.cross(av, bv))


def quat_conj(a):
    return ca.vertcat(a[0], -a[1:4])


def quat_matrix(q):
    """The rotation (body -> world) of a unit quaternion."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))


def axis_angle_quat(axis, angle):
    """The quaternion of the rotation by ``angle`` about the unit ``axis`` (numeric)."""
    return ca.vertcat(ca.cos(angle / 2), ca.sin(angle / 2) * ca.DM(np.asarray(axis, float)))


def normalized_q(m, q):
    """qpos with every free and ball quaternion scaled to unit norm (SX)."""
    parts, k = [], 0
    for j in range(m.njnt):
        a = int(m.jnt_qposadr[j]) + (3 if m.jnt_type[j] == FREE else 0)
        if m.jnt_type[j] in (FREE, BALL):
            parts += [q[k:a], q[a:a + 4] / ca.norm_2(q[a:a + 4])]
            k = a + 4
    parts.append(q[k:m.nq])
    return ca.vertcat(*parts)


def cross_motion(V, s):
    """The spatial motion cross product V × s of twists (a, c) about the world origin."""
    return ca.cross(V[0], s[0]), ca.cross(V[0], s[1]) + ca.cross(V[1], s[0])


def _c(x):
    return ca.DM(np.asarray(x, float).reshape(-1, 1))


class Kinematics:
    """MuJoCo's kinematics of model ``m`` at configuration ``q`` (SX, nq): body poses ``xpos``,
    ``xquat``, ``xmat`` (lists over bodies, the world first), every dof's twist (``axis``: a,
    ``lin``: c, both SX 3-columns), each body's dofs from the world down (``chain``)."""

    def __init__(self, m, q):
        self.m = m
        self.q = normalized_q(m, q)
        nb = m.nbody
        self.xpos, self.xquat, self.xmat = [ca.SX.zeros(3, 1)] * nb, [ca.SX(_c([1, 0, 0, 0]))] * nb, [ca.SX.eye(3)] * nb
        self.axis, self.lin = [None] * m.nv, [None] * m.nv
        self.dof_joint = [int(j) for j in m.dof_jntid]
        self.chain = [[] for _ in range(nb)]
        for b in range(1, nb):
            self._body(b)
            p = int(m.body_parentid[b])
            own = list(range(int(m.body_dofadr[b]), int(m.body_dofadr[b]) + int(m.body_dofnum[b]))) if m.body_dofnum[b] else []
            self.chain[b] = self.chain[p] + own

    def _body(self, b):
        """Pose of body b and its dofs' twists, from its parent's pose and its joints."""
        m, q = self.m, self.q
        p = int(m.body_parentid[b])
        joints = range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b]))
        if len(joints) == 1 and m.jnt_type[joints[0]] == FREE:
            a = int(m.jnt_qposadr[joints[0]])
            x, quat = q[a:a + 3], q[a + 3:a + 7]
        else:
            x = self.xpos[p] + ca.mtimes(self.xmat[p], _c(m.body_pos[b]))
            quat = quat_mul(self.xquat[p], _c(m.body_quat[b]))
        R = quat_matrix(quat)
        rotations = []
        for j in joints:
            kind, a, d = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
            anchor = ca.mtimes(R, _c(m.jnt_pos[j])) + x
            axis = ca.mtimes(R, _c(m.jnt_axis[j]))
            if kind == FREE:
                for k in range(3):
                    self.axis[d + k], self.lin[d + k] = ca.SX.zeros(3, 1), ca.SX(_c(np.eye(3)[k]))
                rotations.append((d + 3, anchor))
                continue
            if kind == SLIDE:
                self.axis[d], self.lin[d] = ca.SX.zeros(3, 1), axis
                x = x + axis * (q[a] - float(m.qpos0[a]))
                continue
            if kind == HINGE:
                self.axis[d], self.lin[d] = axis, ca.cross(anchor, axis)
                quat = quat_mul(quat, axis_angle_quat(m.jnt_axis[j], q[a] - float(m.qpos0[a])))
            else:
                quat = quat_mul(quat, q[a:a + 4])
                rotations.append((d, anchor))
            R = quat_matrix(quat)
            x = anchor - ca.mtimes(R, _c(m.jnt_pos[j]))
        for d, anchor in rotations:     # about the body's final axes (a ball is its body's last rotation)
            for k in range(3):
                self.axis[d + k] = R[:, k]
                self.lin[d + k] = ca.cross(anchor, R[:, k])
        self.xpos[b], self.xquat[b], self.xmat[b] = x, quat, R

    # -- derived frames ---------------------------------------------------------------------
    def xipos(self, b):
        """The centre of mass of body b (world)."""
        return self.xpos[b] + ca.mtimes(self.xmat[b], _c(self.m.body_ipos[b]))

    def frame(self, objtype, i):
        """(position, quaternion, rotation) of a body ("xbody": its frame; "body": its inertial
        frame), a geom or a site, world coordinates, as MuJoCo's frame sensors read them."""
        m = self.m
        if objtype == "xbody":
            return self.xpos[i], self.xquat[i], self.xmat[i]
        body, pos, quat = {"body": (i, m.body_ipos, m.body_iquat), "geom": (m.geom_bodyid, m.geom_pos, m.geom_quat),
                           "site": (m.site_bodyid, m.site_pos, m.site_quat)}[objtype]
        b = int(body if objtype == "body" else body[i])
        q = quat_mul(self.xquat[b], _c(quat[i]))
        return self.xpos[b] + ca.mtimes(self.xmat[b], _c(pos[i])), q, quat_matrix(q)

    def subtree_com(self, b):
        """The centre of mass of body b's subtree (b itself if it has no mass below it)."""
        m = self.m
        below = [c for c in range(b, m.nbody) if self._descends(c, b)]
        mass = sum(float(m.body_mass[c]) for c in below)
        if mass <= 0:
            return self.xipos(b)
        return sum((float(m.body_mass[c]) * self.xipos(c) for c in below if m.body_mass[c]), ca.SX.zeros(3, 1)) / mass

    def _descends(self, c, b):
        while c > b:
            c = int(self.m.body_parentid[c])
        return c == b

    # -- Jacobians, velocities, accelerations -------------------------------------------------
    def jacobian(self, b, point):
        """(Jp, Jr): 3 x nv SX, the velocity of ``point`` (world, SX) moving with body b, and its
        angular velocity, per unit dof velocity; zero columns off b's chain."""
        Jp, Jr = ca.SX(3, self.m.nv), ca.SX(3, self.m.nv)
        for d in self.chain[b]:
            Jp[:, d] = self.lin[d] + ca.cross(self.axis[d], point)
            Jr[:, d] = self.axis[d]
        return Jp, Jr

    def twist(self, b, v):
        """Body b's spatial velocity (ω, v₀) about the world origin for joint velocities v."""
        w, c = ca.SX.zeros(3, 1), ca.SX.zeros(3, 1)
        for d in self.chain[b]:
            w, c = w + self.axis[d] * v[d], c + self.lin[d] * v[d]
        return w, c

    def spatial_acceleration(self, b, v, a):
        """Body b's spatial acceleration (α, a₀) about the world origin: Σ s q̈ + ṡ q̇ over its
        chain, ṡ = V × s with V the velocity of the frame the dof's axis turns with (the dof's
        joint included: a dof crossed with itself is zero)."""
        m = self.m
        alpha, acc = ca.SX.zeros(3, 1), ca.SX.zeros(3, 1)
        V = (ca.SX.zeros(3, 1), ca.SX.zeros(3, 1))
        chain, k = self.chain[b], 0
        while k < len(chain):
            j = self.dof_joint[chain[k]]
            dofs = chain[k:k + NV[int(m.jnt_type[j])]]
            for d in dofs:
                V = (V[0] + self.axis[d] * v[d], V[1] + self.lin[d] * v[d])
            for i, d in enumerate(dofs):
                dw, dc = (0, 0) if m.jnt_type[j] == FREE and i < 3 else cross_motion(V, (self.axis[d], self.lin[d]))
                alpha = alpha + self.axis[d] * a[d] + dw * v[d]
                acc = acc + self.lin[d] * a[d] + dc * v[d]
            k += len(dofs)
        return alpha, acc

    def point_velocity(self, b, point, v):
        w, c = self.twist(b, v)
        return c + ca.cross(w, point), w

    def point_acceleration(self, b, point, v, a):
        """The classical (not spatial) linear acceleration of ``point`` fixed in body b, and the
        body's angular acceleration: a₀ + α × p + ω × (v₀ + ω × p)."""
        w, c = self.twist(b, v)
        alpha, acc = self.spatial_acceleration(b, v, a)
        return acc + ca.cross(alpha, point) + ca.cross(w, c + ca.cross(w, point)), alpha



def quat_to_vel(quat):
    """MuJoCo's angular displacement of a unit quaternion: its axis times its angle, the angle
    taken in (−π, π] (mju_quat2Vel at dt = 1); zero for the identity."""
    vec = quat[1:4]
    s = ca.norm_2(vec)
    angle = 2 * ca.atan2(s, quat[0])
    angle = ca.if_else(angle > np.pi, angle - 2 * np.pi, angle)
    return vec * ca.if_else(s < 1e-15, 0, angle / ca.fmax(s, 1e-15))


def sub_quat(qa, qb):
    """The rotation taking qb to qa as a 3-vector in qb's frame (mju_subQuat): quat_to_vel(qb⁻¹ qa)."""
    return quat_to_vel(quat_mul(quat_conj(qb), qa))
