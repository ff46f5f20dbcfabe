"""A fixed linear feedback controller, the one kind of controller the rollout runs in C (contact/rollout.py):

    τ = τ_ff + Kp e + Kd (v_ref − v),    e_j = q_ref − q on the one-DoF joint (revolute, prismatic) of velocity j,
                                          0 on the other joints' velocities (a free base, a spherical joint)

that is q_ref ⊖ q on the joints' part of the tangent space.  Kp and Kd are nv × nv (a vector: the diagonal).
``simulate.pd_controller`` is one: kp and kd on the diagonal of the one-DoF joints, zero on the others."""
from __future__ import annotations

import numpy as np

from ..errors import InputError


def one_dof_joints(robot):
    """(q indices, v indices) of the robot's revolute and prismatic joints."""
    joints = [b for b in robot.bodies if b.joint.kind in ("revolute", "prismatic")]
    return np.array([b.q_index for b in joints], dtype=int), np.array([b.v_index for b in joints], dtype=int)


def _gain(name, K, nv):
    """``K`` as an nv × nv matrix (a vector: its diagonal), finite."""
    K = np.asarray(K, dtype=float)
    K = np.diag(K) if K.ndim == 1 else K
    if K.shape != (nv, nv) or not np.all(np.isfinite(K)):
        raise InputError(f"{name}: expected {nv} or {nv} x {nv} finite numbers, got shape {K.shape}")
    return K


class LinearFeedback:
    """τ(t, q, v) = τ_ff + Kp e(q) + Kd (v_ref − v) (module docstring); takes a batch (N x nq, N x nv) too."""

    def __init__(self, robot, q_ref, Kp, Kd, tau_ff=None, v_ref=None):
        nq, nv = robot.nq, robot.nv
        self.q_ref = np.array(q_ref, dtype=float).reshape(-1)
        self.tau_ff = np.zeros(nv) if tau_ff is None else np.array(tau_ff, dtype=float).reshape(-1)
        self.v_ref = np.zeros(nv) if v_ref is None else np.array(v_ref, dtype=float).reshape(-1)
        for name, x, n in (("q_ref", self.q_ref, nq), ("tau_ff", self.tau_ff, nv), ("v_ref", self.v_ref, nv)):
            if x.shape != (n,) or not np.all(np.isfinite(x)):
                raise InputError(f"{name}: expected {n} finite numbers, got {x.size}")
        self.Kp, self.Kd = _gain("Kp", Kp, nv), _gain("Kd", Kd, nv)
        qi, vi = one_dof_joints(robot)
        self.joint_q = np.full(nv, -1, dtype=np.int32)      # per velocity: its one-DoF joint's q index, or -1
        self.joint_q[vi] = qi

    def error(self, q):
        """e(q) (nv, or N x nv): q_ref − q on the one-DoF joints, 0 elsewhere."""
        q = np.asarray(q, dtype=float)
        e = np.zeros(q.shape[:-1] + (len(self.joint_q),))
        on = self.joint_q >= 0
        e[..., on] = self.q_ref[self.joint_q[on]] - q[..., self.joint_q[on]]
        return e

    def __call__(self, t, q, v):
        return self.tau_ff + self.error(q) @ self.Kp.T + (self.v_ref - np.asarray(v, dtype=float)) @ self.Kd.T

    def packed(self):
        """The C rollout's fb[]: τ_ff, q_ref, v_ref, Kp and Kd (row-major)."""
        return np.concatenate([self.tau_ff, self.q_ref, self.v_ref, self.Kp.ravel(), self.Kd.ravel()])


def pd_controller(robot, q_ref, kp, kd, tau_ff=None):
    """τ(t, q, v) = kp (q_ref − q) − kd v (+ τ_ff) on the one-DoF joints; zero on the others
    (a free base is not actuated): a LinearFeedback.  ``kp``, ``kd``: a number or one per one-DoF joint."""
    qi, vi = one_dof_joints(robot)
    Kp, Kd = np.zeros((2, robot.nv, robot.nv))
    Kp[vi, vi], Kd[vi, vi] = kp, kd
    return LinearFeedback(robot, q_ref, Kp, Kd, tau_ff)
