"""q ⊕ δ: a configuration moved along a tangent (velocity-space) vector δ by the model's own
integrate, the one definition of the tangent space derivatives with respect to q live in
(../shared/DESIGN.md, "Derivatives").

Per joint (q_j, δ_j), written once over casadi.SX and evaluated numerically through a
casadi.Function of the same expressions:

- revolute, prismatic: q + δ.
- continuous (cos, sin): rotated by the angle δ.
- ball: a unit quaternion q times exp(δ/2) on the right (δ an angular velocity in the
  joint's own frame), as Pinocchio's spherical joint and MuJoCo's ball joint integrate.
- free, velocity "local" (Pinocchio's FreeFlyer, δ = [linear; angular] in the body frame):
  M ⊕ δ = M exp₆(δ), the SE(3) exponential in the local frame: p + R V(ω) v, q exp(ω/2).
- free, velocity "mujoco" (MuJoCo's free joint, δ = [linear in the world frame; angular in
  the body frame]): p + v, q exp(ω/2) (``mj_integratePos``).

Quaternions are stored (x, y, z, w) (Pinocchio) or (w, x, y, z) (MuJoCo's qpos) by the
joint's ``quaternion`` attribute; a joint without ``quaternion`` / ``velocity`` attributes
has Pinocchio's conventions.  The exponentials switch to their Taylor series below
SMALL_ANGLE², so the expressions and their derivatives stay finite at δ = 0 (CasADi
evaluates both branches of an if_else and masks the unused one).

The tangent map T(q) = ∂(q ⊕ δ)/∂δ at δ = 0 (nq x nv) turns a derivative with respect to the
stored q into one on the manifold: ∂f(q ⊕ δ)/∂δ |₀ = ∂f/∂q T(q).
"""
from __future__ import annotations

import functools

import casadi as ca
import numpy as np

# θ² below which the exponentials use their series (θ = ‖ω‖): the series' first omitted
# term is below 1e-24 there, the closed forms' cancellation in (θ − sin θ)/θ³ above it
# at most ε/θ² ≈ 2e-12 relative, on a term of order θ².
SMALL_ANGLE2 = 1e-4


def convention(joint):
    """(kind, quaternion layout "xyzw" | "wxyz", free-joint velocity "local" | "mujoco")."""
    return joint.kind, getattr(joint, "quaternion", "xyzw"), getattr(joint, "velocity", "local")


def layout(robot):
    """What integrate depends on: every joint's convention and q/v indices, in body order."""
    return tuple((*convention(b.joint), b.q_index, b.v_index) for b in robot.bodies)


# -- quaternions (lists x, y, z, w of SX scalars) --------------------------------------------
def _quat_get(qj, order):
    return list(qj) if order == "xyzw" else [qj[1], qj[2], qj[3], qj[0]]


def _quat_put(xyzw, order):
    return xyzw if order == "xyzw" else [xyzw[3], *xyzw[:3]]


def _quat_mul(a, b):
    """Hamilton product a ⊗ b of quaternions (x, y, z, w)."""
    av, aw, bv, bw = ca.vertcat(*a[:3]), a[3], ca.vertcat(*b[:3]), b[3]
    v = aw * bv + bw * av + ca.cross(av, bv)
    return [v[0], v[1], v[2], aw * bw - ca.dot(av, bv)]


def _series(theta2, closed, coefficients):
    """closed(θ) where θ² ≥ SMALL_ANGLE2, else Σ c_k θ^{2k}; ``closed`` never sees θ < 1e-2."""
    small = theta2 < SMALL_ANGLE2
    theta = ca.sqrt(ca.if_else(small, 1.0, theta2))
    taylor = sum(c * theta2 ** k for k, c in enumerate(coefficients))
    return ca.if_else(small, taylor, closed(theta))


def _exp_quaternion(w):
    """exp(ω/2) as a quaternion (x, y, z, w) of the rotation by the vector ω."""
    t2 = ca.dot(w, w)
    s = _series(t2, lambda t: ca.sin(t / 2) / t, (1 / 2, -1 / 48, 1 / 3840, -1 / 645120))
    c = _series(t2, lambda t: ca.cos(t / 2), (1, -1 / 8, 1 / 384, -1 / 46080))
    return [s * w[0], s * w[1], s * w[2], c]


def quaternion_rotation(xyzw):
    """The rotation matrix (SX) of a unit quaternion (x, y, z, w): body to parent coordinates."""
    x, y, z, w = xyzw
    return ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))


def _se3_V(w):
    """V(ω) = I + a [ω]× + b [ω]×², the linear part of exp₆, a = (1 − cos θ)/θ², b = (θ − sin θ)/θ³."""
    t2 = ca.dot(w, w)
    a = _series(t2, lambda t: 2 * ca.sin(t / 2) ** 2 / t ** 2, (1 / 2, -1 / 24, 1 / 720, -1 / 40320))
    b = _series(t2, lambda t: (t - ca.sin(t)) / t ** 3, (1 / 6, -1 / 120, 1 / 5040, -1 / 362880))
    W = ca.skew(w)
    return ca.SX.eye(3) + a * W + b * ca.mtimes(W, W)


# -- one joint -------------------------------------------------------------------------------
def joint_integrate(kind, quaternion, velocity, qj, dj):
    """q_j ⊕ δ_j (SX column) for one joint of the given convention (module docstring)."""
    if kind in ("revolute", "prismatic"):
        return qj + dj
    if kind == "continuous":
        c, s = ca.cos(dj[0]), ca.sin(dj[0])
        return ca.vertcat(qj[0] * c - qj[1] * s, qj[1] * c + qj[0] * s)
    w = dj[-3:]
    k = 3 if kind == "free" else 0
    quat = _quat_get([qj[k + i] for i in range(4)], quaternion)
    turned = ca.vertcat(*_quat_put(_quat_mul(quat, _exp_quaternion(w)), quaternion))
    if kind == "ball":
        return turned
    p = qj[:3]
    moved = p + dj[:3] if velocity == "mujoco" else p + ca.mtimes(quaternion_rotation(quat), ca.mtimes(_se3_V(w), dj[:3]))
    return ca.vertcat(moved, turned)


def joint_tangent(kind, quaternion, velocity, qj):
    """∂(q_j ⊕ δ_j)/∂δ_j at δ_j = 0 (SX, nq_j x nv_j), in closed form."""
    if kind in ("revolute", "prismatic"):
        return ca.SX.eye(1)
    if kind == "continuous":
        return ca.vertcat(-qj[1], qj[0])
    k = 3 if kind == "free" else 0
    x, y, z, w = _quat_get([qj[k + i] for i in range(4)], quaternion)
    # ∂(q ⊗ (ω/2, 1))/∂ω = ½ [w I + [q_v]×; −q_vᵀ] in (x, y, z, w) rows
    G = 0.5 * ca.vertcat(ca.horzcat(w, -z, y), ca.horzcat(z, w, -x), ca.horzcat(-y, x, w), ca.horzcat(-x, -y, -z))
    G = G if quaternion == "xyzw" else ca.vertcat(G[3, :], G[:3, :])
    if kind == "ball":
        return G
    lin = ca.SX.eye(3) if velocity == "mujoco" else quaternion_rotation([x, y, z, w])
    return ca.vertcat(ca.horzcat(lin, ca.SX(3, 3)), ca.horzcat(ca.SX(4, 3), G))


# -- the whole robot ---------------------------------------------------------------------------
_NQ_NV = {"revolute": (1, 1), "prismatic": (1, 1), "continuous": (2, 1), "ball": (4, 3), "free": (7, 6)}


def _blocks(spec):
    for kind, quaternion, velocity, qi, vi in spec:
        nq, nv = _NQ_NV[kind]
        yield (kind, quaternion, velocity), slice(qi, qi + nq), slice(vi, vi + nv)


def _integrate(spec, q, delta):
    return ca.vertcat(*[joint_integrate(*conv, q[qs], delta[vs]) for conv, qs, vs in _blocks(spec)])


def _tangent(spec, q, nq, nv):
    T = ca.SX(nq, nv)
    for conv, qs, vs in _blocks(spec):
        T[qs, vs] = joint_tangent(*conv, q[qs])
    return T


def integrate_sx(robot, q, delta):
    """q ⊕ δ as SX (q: nq, δ: nv, SX)."""
    return _integrate(layout(robot), q, delta)


def tangent_map_sx(robot, q):
    """T(q) = ∂(q ⊕ δ)/∂δ at δ = 0 (nq x nv, block diagonal by joint) as SX."""
    return _tangent(layout(robot), q, robot.nq, robot.nv)


@functools.lru_cache(maxsize=64)
def _functions(spec, nq, nv):
    q, d = ca.SX.sym("q", nq), ca.SX.sym("delta", nv)
    return (ca.Function("integrate", [q, d], [_integrate(spec, q, d)], ["q", "delta"], ["q_plus"]),
            ca.Function("tangent_map", [q], [_tangent(spec, q, nq, nv)], ["q"], ["T"]))


def integrate_function(robot):
    """casadi.Function ``integrate(q, delta) -> q_plus`` (SX inside; callable on MX, numbers)."""
    return _functions(layout(robot), robot.nq, robot.nv)[0]


def tangent_map_function(robot):
    """casadi.Function ``tangent_map(q) -> T``."""
    return _functions(layout(robot), robot.nq, robot.nv)[1]


def integrate(robot, q, delta):
    """q ⊕ δ, numerically (numpy, shape (nq,))."""
    return np.asarray(integrate_function(robot)(np.asarray(q, float), np.asarray(delta, float))).reshape(-1)


def tangent_map(robot, q):
    """T(q) numerically (numpy, nq x nv)."""
    return np.asarray(tangent_map_function(robot)(np.asarray(q, float)))
