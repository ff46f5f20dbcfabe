"""Joint-space sweeps used by the algorithms that form M(q) and J(q) (naive, LTL-OSIM):
composite inertias and the CRBA mass matrix, and the constraint Jacobian, all over the local
transforms of frames.py (../shared/DESIGN.md); and the constraints' rows on each link
(``link_rows``, also read by the matrix-free operators), where a link-to-link constraint puts
rows on both of its bodies."""
from __future__ import annotations

import casadi as ca

from ..symbolic.spatial import sx
from ..symbolic.frames import body_rigid_inertia, relative_transform, transform_force, transform_rigid, transform_rows
from ..symbolic.scalar import dot


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


def link_rows(robot, constraints, T, K_bodies):
    """The matrix-free paper's K_e^i (its eq. 5c): for each constraint, [(body i, rows acting
    on body i's spatial acceleration)], one pair for a constraint to the world, two for A|B
    (K_B from the relative transform of frames.relative_transform), none for joint rows."""
    out = []
    for c, K in zip(constraints.constraints, K_bodies):
        pairs = [] if c.joint else [(c.body, K)]
        if c.body2 is not None:
            pairs.append((c.body2, c.K_body2(relative_transform(robot, T, c.body, c.body2))))
        out.append(pairs)
    return out


def constraint_row_blocks(robot, constraints, T, K_bodies):
    """For each constraint, {body j: Σ_i K_i ^iX_j} over its rows K_i on bodies i below j — the
    Jacobian block of joint j is then that times S_j.  Rows of a two-body constraint meet at the
    bodies' common ancestor and go on as one sum; for A|B:6d that sum is exactly zero (a joint
    above both moves them rigidly together), so it stops there."""
    out = []
    for c, pairs in zip(constraints.constraints, link_rows(robot, constraints, T, K_bodies)):
        pending, blocks = {}, {}
        for i, K in pairs:
            pending[i] = [sx(K)]
        while pending:
            j = max(pending)
            parts = pending.pop(j)
            if len(parts) > 1 and c.kind == "6d":
                continue
            blocks[j] = rows = parts[0] if len(parts) == 1 else parts[0] + parts[1]
            if robot.parent(j) >= 0:
                pending.setdefault(robot.parent(j), []).append(transform_rows(T[j], rows))
        out.append(blocks)
    return out


def constraint_jacobian(robot, constraints, T, K_bodies):
    """J (m x nv) as SX, rows in the order of the constraints; a joint constraint's block is
    𝒦 on the joint's columns."""
    J = ca.SX(constraints.m, robot.nv)
    for c, blocks, r0 in zip(constraints.constraints, constraint_row_blocks(robot, constraints, T, K_bodies),
                             constraints.offsets):
        if c.joint:
            b = robot.bodies[c.body]
            J[r0:r0 + c.rows, b.v_index:b.v_index + b.joint.nv] = c.K_body()
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
