"""The independent NumPy oracle: plain loops over full 6x6 Plücker matrices.

Deliberately shares no code with the symbolic algorithms (only the data classes of
``model/robot.py`` and ``ConstraintSet``), and favours obvious correctness over speed,
so that a bug in the SX implementations cannot hide in a shared helper.

Spatial vectors are Featherstone's [angular; linear], in body coordinates (a body's
coordinates are its joint frame after the joint's motion, see ``model/robot.py``).
"""
from __future__ import annotations

import numpy as np

from .constraints import ConstraintSet  # noqa: F401  (documented input type)
from .errors import ConstraintError
from .model.robot import cross_matrix


# -- spatial algebra (6x6, kept local on purpose) ---------------------------------------
def plucker(E, r):
    """Motion transform from A to B coordinates; E maps A coords to B coords, r is B's
    origin in A coords."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ cross_matrix(r)
    return X


def crm(v):
    """Motion cross product matrix: crm(v) @ m = v x m."""
    out = np.zeros((6, 6))
    out[:3, :3] = cross_matrix(v[:3])
    out[3:, 3:] = cross_matrix(v[:3])
    out[3:, :3] = cross_matrix(v[3:])
    return out


def crf(v):
    """Force cross product matrix: crf(v) @ f = v x* f."""
    return -crm(v).T


def axis_rotation(axis, c, s):
    """Rotation matrix (columns: rotated axes) by the angle with cosine c and sine s about a
    unit axis (Rodrigues)."""
    A = cross_matrix(axis)
    return np.eye(3) + s * A + (1.0 - c) * A @ A


def quaternion_rotation(x, y, z, w):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def joint_transform(joint, qj):
    """X_J(q): motion transform from the joint frame before motion to the body frame."""
    if joint.kind == "revolute":
        # The body frame is the joint frame rotated by q about the axis; E maps into it.
        return plucker(axis_rotation(joint.axis, np.cos(qj[0]), np.sin(qj[0])).T, np.zeros(3))
    if joint.kind == "continuous":
        # Pinocchio's unbounded revolute stores (cos, sin) directly.
        return plucker(axis_rotation(joint.axis, qj[0], qj[1]).T, np.zeros(3))
    if joint.kind == "prismatic":
        return plucker(np.eye(3), joint.axis * qj[0])
    if joint.kind == "free":
        R = quaternion_rotation(*qj[3:7])  # body -> parent (world)
        return plucker(R.T, qj[0:3])
    raise ValueError(f"unsupported joint kind {joint.kind!r}")


def parent_transforms(robot, q):
    """^iX_parent(i) = X_J(q_i) X_T(i) for every body."""
    q = np.asarray(q, dtype=float).reshape(-1)
    out = []
    for b in robot.bodies:
        X_T = plucker(b.rotation, b.translation)
        out.append(joint_transform(b.joint, q[b.q_index:b.q_index + b.joint.nq]) @ X_T)
    return out


def _vslice(body):
    return slice(body.v_index, body.v_index + body.joint.nv)


# -- kinematics and dynamics -------------------------------------------------------------
def mass_matrix(robot, q):
    """Joint-space mass matrix M(q) by the composite-rigid-body algorithm."""
    X_up = parent_transforms(robot, q)
    n = robot.n_bodies
    Ic = [b.spatial_inertia().copy() for b in robot.bodies]
    # Leaves first, so each composite inertia is complete before it is passed up.
    for i in reversed(range(n)):
        p = robot.bodies[i].parent
        if p >= 0:
            Ic[p] = Ic[p] + X_up[i].T @ Ic[i] @ X_up[i]
    M = np.zeros((robot.nv, robot.nv))
    for i in range(n):
        bi = robot.bodies[i]
        S_i = bi.joint.motion_subspace()
        F = Ic[i] @ S_i                     # force needed to move the subtree along S_i
        diag = S_i.T @ F
        M[_vslice(bi), _vslice(bi)] = 0.5 * (diag + diag.T)   # exact symmetry despite rounding
        j = i
        while robot.bodies[j].parent >= 0:
            F = X_up[j].T @ F               # express the force in the parent's coordinates
            j = robot.bodies[j].parent
            bj = robot.bodies[j]
            block = F.T @ bj.joint.motion_subspace()
            M[_vslice(bi), _vslice(bj)] = block
            M[_vslice(bj), _vslice(bi)] = block.T
    return M


def body_jacobian(robot, q, body):
    """6 x nv Jacobian of body ``body``'s spatial velocity in its own coordinates
    ([angular; linear])."""
    X_up = parent_transforms(robot, q)
    J = np.zeros((6, robot.nv))
    X = np.eye(6)                           # ^body X_j, grown one ancestor at a time
    j = body
    while j >= 0:
        bj = robot.bodies[j]
        J[:, _vslice(bj)] = X @ bj.joint.motion_subspace()
        X = X @ X_up[j]
        j = bj.parent
    return J


def constraint_jacobian(robot, constraints, q, K_inputs=None):
    """J (m x nv): the K_i @ body Jacobian blocks, in the order the constraints were given."""
    Ks = constraints.K_body(K_inputs)
    blocks = [K @ body_jacobian(robot, q, c.body) for c, K in zip(constraints.constraints, Ks)]
    return np.vstack(blocks)


def delassus(robot, constraints, q, K_inputs=None):
    """Delassus matrix J M^-1 J^T."""
    J = constraint_jacobian(robot, constraints, q, K_inputs)
    L = np.linalg.cholesky(mass_matrix(robot, q))
    Y = np.linalg.solve(L, J.T)             # L^-1 J^T, so that D = Y^T Y is symmetric by construction
    return Y.T @ Y


def osim(robot, constraints, q, K_inputs=None, rcond=1e-12):
    """Operational-space inertia Lambda = D^-1; ConstraintError if D is rank-deficient."""
    D = delassus(robot, constraints, q, K_inputs)
    eig = np.linalg.eigvalsh(D)
    if eig.max() <= 0 or eig.min() <= rcond * eig.max():
        raise ConstraintError(
            f"the Delassus matrix of constraints {constraints.specs} is rank-deficient "
            f"(eigenvalues {eig.min():.3g} .. {eig.max():.3g}): the constraints are redundant, "
            f"so the operational-space inertia does not exist")
    Lam = np.linalg.solve(D, np.eye(D.shape[0]))
    return 0.5 * (Lam + Lam.T)


def bias_forces(robot, q, v):
    """C(q, v) v + g(q) by the recursive Newton-Euler algorithm with zero acceleration."""
    return inverse_dynamics(robot, q, v, np.zeros(robot.nv))


def inverse_dynamics(robot, q, v, a):
    """tau = M(q) a + C(q, v) v + g(q) (RNEA).  Gravity ``robot.gravity`` is in world
    coordinates, and the world is every root body's parent frame."""
    X_up = parent_transforms(robot, q)
    v = np.asarray(v, dtype=float).reshape(-1)
    a = np.asarray(a, dtype=float).reshape(-1)
    # Fictitious upward acceleration of the world stands in for gravity.
    a_world = np.concatenate([np.zeros(3), -robot.gravity])
    n = robot.n_bodies
    vel, acc, f = [None] * n, [None] * n, [None] * n
    for i, b in enumerate(robot.bodies):
        S = b.joint.motion_subspace()
        vJ = S @ v[_vslice(b)]
        if b.parent < 0:
            vel[i] = vJ
            acc[i] = X_up[i] @ a_world + S @ a[_vslice(b)]
        else:
            vel[i] = X_up[i] @ vel[b.parent] + vJ
            acc[i] = X_up[i] @ acc[b.parent] + S @ a[_vslice(b)] + crm(vel[i]) @ vJ
        I = b.spatial_inertia()
        f[i] = I @ acc[i] + crf(vel[i]) @ I @ vel[i]
    tau = np.zeros(robot.nv)
    for i in reversed(range(n)):
        b = robot.bodies[i]
        tau[_vslice(b)] = b.joint.motion_subspace().T @ f[i]
        if b.parent >= 0:
            f[b.parent] = f[b.parent] + X_up[i].T @ f[i]
    return tau


def forward_dynamics(robot, q, v, tau):
    """Unconstrained joint acceleration M^-1 (tau - bias)."""
    return np.linalg.solve(mass_matrix(robot, q), np.asarray(tau, float) - bias_forces(robot, q, v))
