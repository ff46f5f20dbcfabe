"""Joint-space sweeps of the algorithms that form M(q) and J(q) (naive, LTL-OSIM, LTL, LTL-soft):
composite inertias and the CRBA mass matrix, the constraint Jacobian, all over the local
transforms of frames.py (../shared/DESIGN.md); Featherstone's sparse factorization M = Lᵀ D L
and its solves; and the constraints' rows on each link (``link_rows``, also read by the
matrix-free operators), where a link-to-link constraint puts rows on both of its bodies.

Branch-induced sparsity (Featherstone, "Efficient factorization of the joint-space inertia
matrix for branched kinematic trees", IJRR 2005): with the dofs numbered parents first and λ(k)
the parent dof of k (``dof_parents``; a multi-dof joint is a chain of its dofs), M_ki ≠ 0 only
for i an ancestor of k.  Factorizing leaves first keeps L (unit lower, L_ki for i ∈ anc(k))
inside M's pattern — no fill-in — so every loop below runs over ancestor chains only."""
from __future__ import annotations

import casadi as ca

import numpy as np

from ..symbolic.frames import (body_rigid_inertia, relative_transform, transform_force, transform_inertia,
                               transform_rigid, transform_rows)
from ..symbolic import linalg
from ..symbolic.scalar import dot, is_zero, sym_vec, vadd
from ..symbolic.spatial import sx
from .articulated import symmetric_sum


def motion_subspace(body):
    """S_i (6 x nv_i), numeric, exact zeros and ones."""
    return body.joint.motion_subspace()


def composite_inertias(robot, T, extra=None):
    """I^c_i: inertia of the subtree rooted at i, in i's frame (CRBA's backward sweep), for
    T = frames.local_transforms(robot, q[, offsets]); with ``extra`` ({i: symmetric 6x6 SX}
    added to the bodies' inertias, e.g. LTL-soft's Kᵀ R⁻¹ K) also the composite of those,
    E^c_i, a general symmetric 6x6 carried only along the paths that hold one (else None).
    Returns (I^c, E^c)."""
    Ic = [body_rigid_inertia(b, t.o) for b, t in zip(robot.bodies, T)]
    terms = [[] for _ in robot.bodies]
    for i, E in (extra or {}).items():
        terms[i].append(E)
    Ec = [None] * robot.n_bodies
    for i in reversed(range(robot.n_bodies)):
        if terms[i]:
            Ec[i] = symmetric_sum(np.zeros((6, 6)), terms[i])
        p = robot.parent(i)
        if p >= 0:
            Ic[p] = Ic[p] + transform_rigid(T[i], Ic[i])
            if Ec[i] is not None:
                terms[p].append(transform_inertia(T[i], Ec[i]))
    return Ic, Ec


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


def mass_matrix(robot, T, extra=None):
    """M (nv x nv) by CRBA as upper entries {(r, c): e}, each computed once (Featherstone, RBDA
    Table 6.2): M_ji = S_jᵀ ^iX_jᵀ I^c_i S_i for j an ancestor of i (or i), plus the armature on
    the diagonal; ``extra`` as for ``composite_inertias`` (M + Jᵀ R⁻¹ J for LTL-soft)."""
    Ic, Ec = composite_inertias(robot, T, extra)
    entries = {}
    for i, b in enumerate(robot.bodies):
        S = motion_subspace(b)
        F = [[Fc[a] for a in range(6)] for Fc in (Ic[i].times(S[:, c]) for c in range(b.joint.nv))]
        if Ec[i] is not None:
            F = [vadd(f, sym_vec(Ec[i], S[:, c])) for c, f in enumerate(F)]
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
    for d in map(int, np.flatnonzero(robot.armature)):
        entries[(d, d)] = entries[(d, d)] + float(robot.armature[d])
    return entries


def _pick(s, f):
    """sᵀ f for a numeric column s (a selection when s is a signed unit vector)."""
    e = dot(f, s)
    return e if isinstance(e, ca.SX) else ca.SX(e)


# -- the sparse factorization M = Lᵀ D L and its solves ---------------------------------------------
def dof_parents(robot):
    """λ(k) for every dof k (-1 at a root): a multi-dof joint is a chain of its dofs."""
    parents = []
    for b in robot.bodies:
        p = robot.bodies[b.parent] if b.parent >= 0 else None
        prev = p.v_index + p.joint.nv - 1 if p is not None else -1
        for t in range(b.joint.nv):
            parents.append(prev if t == 0 else b.v_index + t - 1)
    return parents


def ltdl(M, parents, ops):
    """M = Lᵀ D L (Featherstone 2005, Table 2) for M given by upper entries {(i, k): e}, i ≤ k
    (i an ancestor of k, or i = k), leaves first: (L as {(k, i): L_ki}, D, D⁻¹) as lists.
    ``ops`` builds the products and differences (linalg.Shared: each one once)."""
    n = len(parents)
    H = {(k, i): e for (i, k), e in M.items()}                    # lower entries H[k, i], i ≤ k
    L, D, Dinv = {}, [None] * n, [None] * n
    for k in reversed(range(n)):
        D[k] = H[(k, k)]
        Dinv[k] = 1 / D[k]
        i = parents[k]
        while i >= 0:
            a = ops.mul(H.get((k, i), 0), Dinv[k])
            j = i
            while j >= 0:                                          # Schur update of anc(k)
                H[(i, j)] = ops.sub(H.get((i, j), 0), ops.mul(a, H.get((k, j), 0)))
                j = parents[j]
            L[(k, i)] = a
            i = parents[i]
    return L, D, Dinv


def solve_lt(L, parents, b, ops):
    """L⁻ᵀ b (leaves first; a row y of Y = J L⁻¹ is L⁻ᵀ applied to J's row), zeros of b skipped."""
    y = list(b)
    for k in reversed(range(len(parents))):
        if is_zero(y[k]):
            continue
        i = parents[k]
        while i >= 0:
            y[i] = ops.sub(y[i], ops.mul(y[k], L[(k, i)]))
            i = parents[i]
    return y


def solve_l(L, parents, z, ops):
    """L⁻¹ z (roots first)."""
    x = [None] * len(parents)
    for k in range(len(parents)):
        acc = z[k]
        i = parents[k]
        while i >= 0:
            acc = ops.sub(acc, ops.mul(L[(k, i)], x[i]))
            i = parents[i]
        x[k] = acc
    return x


class MassFactor:
    """M = Lᵀ D L (``ltdl``) of M's upper entries, applied to many right-hand sides: M⁻¹ b =
    L⁻¹ D⁻¹ L⁻ᵀ b, each product and difference built once (linalg.Shared)."""

    def __init__(self, robot, M):
        self.parents, self.ops = dof_parents(robot), linalg.Shared()
        self.L, self.D, self.Dinv = ltdl(M, self.parents, self.ops)

    def half(self, b):
        """D⁻¹ L⁻ᵀ b (zeros of b and of L⁻ᵀ b skipped)."""
        y = solve_lt(self.L, self.parents, b, self.ops)
        return [self.ops.mul(x, d) if not is_zero(x) else 0.0 for x, d in zip(y, self.Dinv)]

    def finish(self, w):
        """L⁻¹ w."""
        return solve_l(self.L, self.parents, w, self.ops)

    def solve(self, b):
        return self.finish(self.half(b))

    def inverse(self):
        """Upper entries {(a, b): (M⁻¹)_ab, a ≤ b} of M⁻¹ = N D⁻¹ Nᵀ, N = L⁻¹ (unit lower, with
        the pattern of L: N_ak ≠ 0 only for k an ancestor of a), each entry a sum over the common
        ancestors only: dofs in different branches meet at the base, a few terms instead of a
        solve over every dof.  With Ñ = −N below the diagonal, Ñ_ak = L_ak − Σ_{k ≺ p ≺ a} L_ap Ñ_pk
        (no negation anywhere) and M⁻¹_ab = [a = b] D⁻¹_a − D⁻¹_a Ñ_ba [a ≺ b] + Σ_k Ñ_ak D⁻¹_k Ñ_bk."""
        ops, n = self.ops, len(self.parents)
        up = []                                         # strict ancestors, nearest first
        for a in range(n):
            chain, p = [], self.parents[a]
            while p >= 0:
                chain.append(p)
                p = self.parents[p]
            up.append(chain)
        Nt = {}
        for a in range(n):
            for x, k in enumerate(up[a]):
                acc = self.L[(a, k)]
                for p in up[a][:x]:                     # k ≺ p ≺ a
                    acc = ops.sub(acc, ops.mul(self.L[(a, p)], Nt[(p, k)]))
                Nt[(a, k)] = acc
        W = {key: ops.mul(e, self.Dinv[key[1]]) for key, e in Nt.items()}      # Ñ_bk D⁻¹_k
        out = {}
        for a in range(n):
            anc_a = set(up[a])
            for b in range(a, n):
                common = [k for k in up[b] if k in anc_a]
                e = self.Dinv[a] if a == b else 0.0
                if a in up[b]:
                    e = ops.sub(e, W[(b, a)]) if not is_zero(e) else -W[(b, a)]
                for k in common:
                    e = ops.mul(Nt[(a, k)], W[(b, k)]) if is_zero(e) else ops.add(e, ops.mul(Nt[(a, k)], W[(b, k)]))
                out[(a, b)] = e if not is_zero(e) else 0.0
        return out
