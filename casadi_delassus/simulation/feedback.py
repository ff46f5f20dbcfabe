"""A fixed linear feedback controller, the one kind of controller the rollout runs in C (codegen/contact_rollout.py):

    τ = τ_ff + Kp e + Kd (v_ref − v),    e_j = q_ref − q on the one-DoF joint (revolute, prismatic) of velocity j,
                                          θ_ref ⊖ θ on a continuous joint (q = (cos θ, sin θ)): the angle from
                                          θ to θ_ref in (−π, π], atan2(sin(θ_ref − θ), cos(θ_ref − θ)) from the
                                          four numbers (no angle is unwrapped, so a turn more or less is no error),
                                          0 on the other joints' velocities (a free base, a spherical joint)

that is q_ref ⊖ q on the joints' part of the tangent space (model/integrate.py's difference for those joints).  Kp and
Kd are nv × nv (a vector: the diagonal).  ``simulate.pd_controller`` is one: kp and kd on the diagonal of the one-DoF
joints (continuous ones included), zero on the others."""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..errors import InputError
from ..model import Robot


ONE_DOF = ("revolute", "prismatic", "continuous")


def one_dof_joints(robot):
    """(q indices, v indices, continuous) of the robot's one-DoF joints: revolute, prismatic and continuous (whose q
    index is that of its cos, the sin following), ``continuous`` a bool per joint."""
    joints = [b for b in robot.bodies if b.joint.kind in ONE_DOF]
    return (np.array([b.q_index for b in joints], dtype=int), np.array([b.v_index for b in joints], dtype=int),
            np.array([b.joint.kind == "continuous" for b in joints], dtype=bool))


def _numbers(name, x, shapes):
    """``x`` as a float array of one of ``shapes``, finite; an InputError saying what was wanted otherwise."""
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        a = None
    if a is None or a.shape not in shapes or not np.all(np.isfinite(a)):
        want = " or ".join(" x ".join(map(str, s)) if s else "1" for s in shapes)
        got = "not numbers" if a is None else f"shape {a.shape}" if a.shape not in shapes else "a value not finite"
        raise InputError(f"{name}: expected {want} finite numbers, got {got}")
    return a


def _gain(name, K, nv):
    """``K`` as an nv × nv matrix (a vector: its diagonal), finite."""
    K = _numbers(name, K, [(nv,), (nv, nv)])
    return np.diag(K) if K.ndim == 1 else K


def angle_error(c_ref, s_ref, c, s):
    """θ_ref ⊖ θ in (−π, π] from (cos, sin) of both: atan2 of the sine and cosine of their difference (the C rollout's
    feedback computes the same, codegen/templates/contact_rollout.c.j2)."""
    return np.arctan2(s_ref * c - c_ref * s, c_ref * c + s_ref * s)


class LinearFeedback:
    """τ(t, q, v) = τ_ff + Kp e(q) + Kd (v_ref − v) (module docstring); takes a batch (N x nq, N x nv) too."""

    def __init__(self, robot: Robot, q_ref: npt.ArrayLike, Kp: npt.ArrayLike, Kd: npt.ArrayLike,
                 tau_ff: npt.ArrayLike | None = None, v_ref: npt.ArrayLike | None = None) -> None:
        nq, nv = robot.nq, robot.nv
        self.q_ref = _numbers("q_ref", q_ref, [(nq,)]).copy()
        self.tau_ff = np.zeros(nv) if tau_ff is None else _numbers("tau_ff", tau_ff, [(nv,)]).copy()
        self.v_ref = np.zeros(nv) if v_ref is None else _numbers("v_ref", v_ref, [(nv,)]).copy()
        self.Kp, self.Kd = _gain("Kp", Kp, nv), _gain("Kd", Kd, nv)
        qi, vi, continuous = one_dof_joints(robot)
        self.joint_q = np.full(nv, -1, dtype=np.int32)      # per velocity: its one-DoF joint's q index, or -1
        self.joint_q[vi] = qi
        self.continuous = np.zeros(nv, dtype=np.int32)      # per velocity: 1 where that q index holds (cos, sin)
        self.continuous[vi] = continuous

    def error(self, q):
        """e(q) (nv, or N x nv): q_ref − q on the one-DoF joints, the wrapped angle on continuous ones, 0 elsewhere."""
        q = np.asarray(q, dtype=float)
        e = np.zeros(q.shape[:-1] + (len(self.joint_q),))
        line, turn = (self.joint_q >= 0) & (self.continuous == 0), self.continuous == 1
        e[..., line] = self.q_ref[self.joint_q[line]] - q[..., self.joint_q[line]]
        c, s = self.joint_q[turn], self.joint_q[turn] + 1
        e[..., turn] = angle_error(self.q_ref[c], self.q_ref[s], q[..., c], q[..., s])
        return e

    def __call__(self, t: float, q: npt.ArrayLike, v: npt.ArrayLike) -> np.ndarray:
        return self.tau_ff + self.error(q) @ self.Kp.T + (self.v_ref - np.asarray(v, dtype=float)) @ self.Kd.T

    def packed(self):
        """The C rollout's fb[]: τ_ff, q_ref, v_ref, Kp and Kd (row-major)."""
        return np.concatenate([self.tau_ff, self.q_ref, self.v_ref, self.Kp.ravel(), self.Kd.ravel()])


def pd_controller(robot: Robot, q_ref: npt.ArrayLike, kp: float | npt.ArrayLike, kd: float | npt.ArrayLike,
                  tau_ff: npt.ArrayLike | None = None) -> LinearFeedback:
    """τ(t, q, v) = kp (q_ref ⊖ q) − kd v (+ τ_ff) on the one-DoF joints (revolute, prismatic, continuous); zero on
    the others (a free base is not actuated): a LinearFeedback.  ``kp``, ``kd``: a number or one per one-DoF joint."""
    _, vi, _ = one_dof_joints(robot)
    Kp, Kd = np.zeros((2, robot.nv, robot.nv))
    Kp[vi, vi], Kd[vi, vi] = (_numbers(name, k, [(), (len(vi),)]) for name, k in (("kp", kp), ("kd", kd)))
    return LinearFeedback(robot, q_ref, Kp, Kd, tau_ff)
