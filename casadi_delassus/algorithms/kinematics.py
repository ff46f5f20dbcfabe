"""Joint-space sweeps used by the algorithms that form M(q) and J(q) (naive, LTL-OSIM):
composite inertias and the CRBA mass matrix, and the constraint Jacobian, all over the local
transforms of frames.py (../shared/DESIGN.md)."""
from __future__ import annotations

import casadi as ca

from ..spatial import sx
from .frames import body_rigid_inertia, transform_force, transform_rigid, transform_rows
from .linalg import dot


def motion_subspace(body):
    """S_i (6 x nv_i), numeric, exact zeros and ones."""
    return body.joint.motion_subspace()


def composite_inertias(robot, T):
    """I^c_i: inertia of the subtree rooted at i, in i's frame (CRBA's backward sweep), for
    T = frames.local_transforms(robot, q[, offsets])."""
    Ic = [body_rigid_inertia(b, t.o) for b, t in zip(robot.bodies, T)]
    for i in reversed(range(robot.n_bodies)):
        p = robot.parent(i)
        if p >= 0:
            Ic[p] = Ic[p] + transform_rigid(T[i], Ic[i])
    return Ic


def constraint_row_blocks(robot, constraints, T, K_bodies):
    """For each constraint, {ancestor body j: K_i ^iX_j} — its rows propagated to every
    body that supports it; the Jacobian block of joint j is then (K_i ^iX_j) S_j."""
    out = []
    for c, K in zip(constraints.constraints, K_bodies):
        rows, blocks, i = sx(K), {}, c.body
        while i >= 0:
            blocks[i] = rows
            if robot.parent(i) >= 0:
                rows = transform_rows(T[i], rows)
            i = robot.parent(i)
        out.append(blocks)
    return out


def constraint_jacobian(robot, constraints, T, K_bodies):
    """J (m x nv) as SX, rows in the order of the constraints."""
    J = ca.SX(constraints.m, robot.nv)
    for c, blocks, r0 in zip(constraints.constraints, constraint_row_blocks(robot, constraints, T, K_bodies),
                             constraints.offsets):
        for j, rows in blocks.items():
            b = robot.bodies[j]
            J[r0:r0 + c.rows, b.v_index:b.v_index + b.joint.nv] = ca.mtimes(rows, sx(motion_subspace(b)))
    return J


def mass_matrix(robot, T):
    """M (nv x nv) by CRBA as upper entries {(r, c): e}, each computed once."""
    Ic = composite_inertias(robot, T)
    entries = {}
    for i, b in enumerate(robot.bodies):
        S = motion_subspace(b)
        F = [[Fc[a] for a in range(6)] for Fc in (Ic[i].times(S[:, c]) for c in range(b.joint.nv))]
        j = i
        while j >= 0:
            bj = robot.bodies[j]
            Sj = motion_subspace(bj)
            for a in range(bj.joint.nv):
                for c in range(b.joint.nv):
                    r, col = bj.v_index + a, b.v_index + c
                    if r <= col:
                        entries[(r, col)] = _pick(Sj[:, a], F[c])
            if robot.parent(j) >= 0:
                F = [transform_force(T[j], f) for f in F]
            j = robot.parent(j)
    return entries


def _pick(s, f):
    """sᵀ f for a numeric column s (a selection when s is a signed unit vector)."""
    e = dot(f, s)
    return e if isinstance(e, ca.SX) else ca.SX(e)
