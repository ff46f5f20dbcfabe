"""Shared sweeps used by several algorithms: joint transforms ^iX_λ(i)(q), motion
subspaces, composite inertias and the propagation of constraint rows to the root.
Everything is in local link frames (../shared/DESIGN.md)."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..spatial import RigidInertia, Transform, sx


def _revolute_rotation(axis, c, s):
    """E_J = R(axis, θ)ᵀ.  For an axis along ±x, ±y, ±z the entries are written out so
    no c + (1 - c) survives (CasADi would not fold it to 1)."""
    k = int(np.argmax(np.abs(axis)))
    if abs(axis[k]) == 1.0:
        sign = float(axis[k])
        i, j = (k + 1) % 3, (k + 2) % 3
        E = ca.SX.eye(3)
        E[i, i], E[j, j] = c, c
        E[i, j], E[j, i] = sign * s, -sign * s
        return E
    a = sx(axis)
    return c * ca.SX.eye(3) + (1 - c) * ca.mtimes(a, a.T) - s * ca.skew(a)


def joint_transform(body, q):
    """^iX_λ(i) = X_J(q_i) X_T(i) as a compact ``Transform``."""
    j, k = body.joint, body.q_index
    E_T, r_T = body.rotation, body.translation
    if j.kind in ("revolute", "continuous"):
        c, s = (ca.cos(q[k]), ca.sin(q[k])) if j.kind == "revolute" else (q[k], q[k + 1])
        return Transform(ca.mtimes(_revolute_rotation(j.axis, c, s), sx(E_T)), r_T)
    if j.kind == "prismatic":
        return Transform(E_T, sx(r_T).reshape((3, 1)) + ca.mtimes(sx(E_T).T, sx(j.axis) * q[k]))
    # free joint: position p in the parent, unit quaternion (x, y, z, w) body -> parent
    x, y, z, w = (q[k + 3 + i] for i in range(4))
    R = ca.vertcat(
        ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))
    X_J = Transform(R.T, q[k:k + 3])
    if np.allclose(E_T, np.eye(3)) and not np.any(r_T):
        return X_J
    return Transform(ca.mtimes(X_J.E, sx(E_T)), sx(r_T).reshape((3, 1)) + ca.mtimes(sx(E_T).T, X_J.r))


def joint_transforms(robot, q):
    return [joint_transform(b, q) for b in robot.bodies]


def motion_subspace(body):
    """S_i (6 x nv_i), numeric, exact zeros and ones."""
    return body.joint.motion_subspace()


def project(S, F):
    """Sᵀ F for a numeric S whose columns are (signed) unit vectors picks rows for free."""
    return ca.mtimes(sx(S).T, F)


def composite_inertias(robot, X):
    """I^c_i: inertia of the subtree rooted at i, in i's frame (CRBA's backward sweep)."""
    Ic = [RigidInertia.of_body(b) for b in robot.bodies]
    for i in reversed(range(robot.n_bodies)):
        p = robot.parent(i)
        if p >= 0:
            Ic[p] = Ic[p] + Ic[i].to_parent(X[i])
    return Ic


def constraint_row_blocks(robot, constraints, X, K_bodies):
    """For each constraint, {ancestor body j: K_i ^iX_j} — its rows propagated to every
    body that supports it; the Jacobian block of joint j is then (K_i ^iX_j) S_j."""
    out = []
    for c, K in zip(constraints.constraints, K_bodies):
        rows, blocks, i = sx(K), {}, c.body
        while i >= 0:
            blocks[i] = rows
            if robot.parent(i) >= 0:
                rows = X[i].transpose_rows(rows)
            i = robot.parent(i)
        out.append(blocks)
    return out


def constraint_jacobian(robot, constraints, X, K_bodies):
    """J (m x nv) as SX, rows in the order of the constraints."""
    J = ca.SX(constraints.m, robot.nv)
    for c, blocks, r0 in zip(constraints.constraints, constraint_row_blocks(robot, constraints, X, K_bodies),
                             constraints.offsets):
        for j, rows in blocks.items():
            b = robot.bodies[j]
            J[r0:r0 + c.rows, b.v_index:b.v_index + b.joint.nv] = ca.mtimes(rows, sx(motion_subspace(b)))
    return J


def mass_matrix(robot, X):
    """M (nv x nv) by CRBA, upper triangle computed once and mirrored."""
    Ic = composite_inertias(robot, X)
    entries = {}
    for i, b in enumerate(robot.bodies):
        F = Ic[i].times(sx(motion_subspace(b)))
        j = i
        while j >= 0:
            bj = robot.bodies[j]
            block = project(motion_subspace(bj), F)
            for a in range(bj.joint.nv):
                for c in range(b.joint.nv):
                    r, col = bj.v_index + a, b.v_index + c
                    if r <= col:
                        entries[(r, col)] = block[a, c]
            if robot.parent(j) >= 0:
                F = X[j].transpose_force(F)
            j = robot.parent(j)
    return entries
