"""pv — the Popov-Vereshchagin constrained dynamics solver for floating-base trees with
constraints on any link, O(n + m²d + m³).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Alg. 1 (Sec. V-C), eqs. (41)-(48).  The
problem (eq. 36) is Gauss' principle with the motion constraints K_i a_i = k_i; in joint space
M v̇ + c = τ + Jᵀ λ, J v̇ + J̇ v = k (reference.constrained_dynamics; the output ``lam`` is
Pinocchio's λ, the paper's multipliers are −lam).  Three sweeps, in local link frames, driven
by ``solve``, which takes the choice of the joints that eliminate a row early (Sec. VIII) as a
policy: pv's (``never_vanishing``, below), or pv_early's (every joint; it composes this driver):

first forward sweep (sweeps/tree.py, Tree): ^iX_λ(i), v_i, a_b,i, p_i = −f_i   (lines 1-5)
    own rows: K_i^A ← K_i,  l_i ← K_i a_grav,i − k_i  (l_i = −k_i with gravity, Sec. III-B2)
backward sweep, leaves first:                                                   (lines 6-12)
    D_i, U_i, H_i^a = P_i H_i^A            (articulated.articulated_inertias, lines 7, 9)
    u_i = τ_i − S_iᵀ p_i^A,  p_λ^A += ^iX_λᵀ (p_i^A + H_i^a a_b,i + Ū_i u_i)        (line 8)
    k_i = K_i^A S_i,  K_λ^A ← [K_λ^A; K_i^A P_iᵀ ^iX_λ],  l shifted by eq. (42d)   (lines 10, 12)
    L^A ← L^A + k_i D_i⁻¹ k_iᵀ  (rows keep their ids: one diagonal block per branch, line 11)
free base b: eq. (47), λ = (L_b + K_b H_b⁻¹ K_bᵀ)⁻¹ (l_b − K_b H_b⁻¹ p_b^A), a_b = −H_b⁻¹ (p_b^A + K_bᵀ λ),
    by the block elimination of linalg.saddle_solve: the branch blocks of L_b one after
    the other against the 6x6 base, with pivots that are diagonal blocks of Schur complements of
    Λ⁻¹ = L_b + K_b H_b⁻¹ K_bᵀ: positive wherever the hard problem is well-posed (fewer operations
    than eq. (49) with the reduced rows below, README "Design choices, measured").  Eq. (49) inverts each branch block of
    L_b, which is singular where the branch alone cannot move its rows (a stretched knee under
    a welded foot: q = 0 on talos, go1, g1, solo12) although Λ⁻¹ is not: it returned NaN there
    and lost up to 1e-1 of v̇ within 1e-8 rad of it.
fixed roots (the world): λ = (L_0^A)⁻¹ (l_0 + K_0^A a_0) (eq. 43), a_0 = −a_grav, pivot-free LDLᵀ.
roll-out, roots first:                                                           (lines 15-17)
    q̈_i = D_i⁻¹ (u_i − U_iᵀ (^iX_λ a_λ + a_b,i) − k_iᵀ λ_i^A),  a_i = ^iX_λ a_λ + a_b,i + S_i q̈_i

Two refinements that compute the same result:
- Early elimination (Sec. VIII, eqs. 60-64: sweeps/elimination.py, derived in pv_early.py) only where
  the pivot Σ = ‖k̃‖²/D_i provably never
  vanishes: at the constrained link's own joint when k̃ = K_i S_i is a nonzero constant (numeric
  K_i), and at its parent for a numeric full-rank 6-row K_i (the 5 rows left annihilate exactly
  S_i, so there k̃ = 0 only if the parent's joint twist is S_i's: a model property, checked at
  trace time, true at every q or at none).  A 6D weld then brings 4 rows to the base instead of 6.
- The rows of each K_i are orthonormalized first (Tree.orthonormalize): an
  ill-conditioned runtime K_i no longer squares into cond(Λ⁻¹).

Redundant constraints (two welds on one link) make Λ⁻¹ singular for every q: detected at trace
time from the solve's pivots at a random configuration, ConstraintError (pv_early and the soft
solvers handle such sets).  Where Λ⁻¹ is singular only at some configurations (an arm at a
singularity under a 6D weld), the generated code divides by a zero pivot there: non-finite
output, as the hard problem has no unique solution.  Without constraints this is exactly aba.py.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..errors import ConstraintError
from ..sweeps.dynamics_derivatives import hard_derivative
from ..sweeps.tree import (Tree, axis_g, check_regular, joint_backward, joint_backward_multi, joint_forward,
                           joint_forward_multi, root_accel)
from ..symbolic import passes
from ..symbolic.probe import DEPENDENT, ZERO, Probe
from ..sweeps.elimination import eliminate, is_numeric, rebuild
from ..sweeps.articulated import articulated_inertias
from ..symbolic import linalg
from ..symbolic.frames import transform_force, transform_motion
from ..symbolic.scalar import add, column, dot, is_zero, mat_vec, mul, neg, sub, vadd, vsub
from ..symbolic.spatial import symmetric


def never_vanishing(tree, i, st, kt, nonzero):
    """pv's elimination policy: where the pivot cannot vanish at any configuration (see above)."""
    if all(is_numeric(x) for x in kt):
        return any(float(x) != 0 for x in kt)
    return st.weld == "reduced" and nonzero(kt)


class Stack:
    """The rows that reach a body: K rows (6-lists), l, their ids (keys of L^A), and where they
    come from (segments ('own', global rows) or ('child', child body, count)) to hand the
    multipliers back.  ``fresh``: no row has an L^A entry yet (every joint below eliminated or
    did not see them), the condition for eliminating here.  ``weld``: the rows are one numeric
    full-rank 6-row constraint's own rows ("own") or the 5 its joint left ("reduced"), for pv's policy."""

    def __init__(self):
        self.K, self.l, self.ids, self.segments = [], [], [], []
        self.keep = []              # which of the rows passed on (K P_iᵀ, after Q) survive the probe
        self.fresh = True
        self.weld = None

    def extend(self, K, l, ids, segment, fresh):
        self.K += K
        self.l += l
        self.ids += ids
        self.segments.append(segment)
        self.fresh = self.fresh and fresh


def propagate(tree, i, art, K, l, u_i, c_i):
    """Alg. 1 lines 10 and 12 at a 1-DoF joint that does not eliminate: (k̃, K P_iᵀ in body
    coordinates, l shifted by eq. (42d)), k_i = K S_i = sign · k̃ (the sign is folded where
    k_i is used)."""
    a, s, g = axis_g(tree, i, art)
    kt = [row[a] for row in K] if a is not None else [tree.sq(i, row) for row in K]
    nu = mul(art.Dinv, u_i)
    pm = add if s > 0 else sub
    Kp = [[0.0 if col == a else sub(row[col], mul(kr, g[col])) for col in range(6)]
          for row, kr in zip(K, kt)]                  # K Pᵀ, column a exactly zero
    # l + K^A (a_b + S D⁻¹ (u − Uᵀ a_b)) = l + K Pᵀ a_b + k D⁻¹ u   (eq. 42d)
    lp = [pm(add(lr, dot(row, c_i)), mul(kr, nu)) for row, lr, kr in zip(Kp, l, kt)]
    return kt, Kp, lp


def propagate_multi(art, K, l, u_i, c_i):
    """``propagate`` at a joint of several DoFs (a ball joint): (k_i = K S_i as rows of n_i,
    K P_iᵀ = K − k_i D_i⁻¹ U_iᵀ, exactly zero along the coordinates S_i selects, and l shifted by
    eq. (42d): l + K P_iᵀ a_b + k_i D_i⁻¹ u_i)."""
    kt = [art.coords(row) for row in K]
    nu = art.solve(u_i)
    zero = art.zero
    Kp = []
    for row, kr in zip(K, kt):
        y = art.solve(kr)
        Kp.append([0.0 if col in zero else sub(row[col], dot(art.Ul[col], y)) for col in range(6)])
    lp = [add(add(lr, dot(row, c_i)), dot(kr, nu)) for row, lr, kr in zip(Kp, l, kt)]
    return kt, Kp, lp


def solve(tree, v, tau, k, probe, early, drop=True):
    """PV Alg. 1 with early elimination where ``early(tree, i, stack, k̃, nonzero)`` says so
    (only on fresh rows) and L^A accumulated for rows that pass a joint that sees them; with
    ``drop``, fresh rows that reach a free base linearly dependent on others (at the probe: e.g.
    four points on the base link itself) are dropped with multiplier 0 (Remark 9).
    Returns (per-body q̈ lists, λ in the paper's sign over the m rows, pivots of the base / root
    solves for a trace-time redundancy check, the Elimination per body or None); each sweep is a
    named pass (symbolic/passes.py)."""
    sw = Sweeps(tree, probe, early, drop)
    # first forward sweep, lines 1-5, for i in S (roots first): X_i (line 2, tree.T), v_i, a_b,i
    # (lines 3-4), f_i^A = −p_i (line 5)
    vel, c, _ = tree.velocities(v)
    p = tree.bias_forces(vel)
    passes.done("first forward sweep: v_i, a_b,i, p_i", vel, c, p)
    sw.start(k, c, p, tau)                          # line 5: K_i^A ← K_i, l_i ← −k_i (with gravity)
    # backward sweep, lines 6-12, for i in S_r (leaves first): D_i, P_i and H^A_λ(i) (lines 7, 9) by
    # articulated_inertias, which calls sw.backward at each joint for f^A (line 8), K^A (line 10),
    # L^A (line 11, or an early elimination) and l (line 12)
    abi = articulated_inertias(tree.robot, tree.T, post=sw.backward)
    bases = [i for i in range(tree.n) if abi[i].free]
    passes.done("backward: H^A, D (with the rows and Σ⁻¹, K̃ of the eliminations they depend on)", [art.HA for art in abi])
    passes.done("backward: forces p^A, u (with l̃ of the eliminations)", [sw.pA[b] for b in bases], sw.u)
    passes.done("backward: the other rows K^A, l, L^A", [sw.stacks[b].K for b in bases], [sw.stacks[b].l for b in bases], sw.L)
    acc = sw.resolve(abi)                           # lines 13-14: a_b and λ_b^A (eq. 47), fixed roots (eq. 43)
    passes.done("base solve (eq. 47, block elimination) / root solve (eq. 43)", [acc[b] for b in bases],
        [m for m in sw.mu if m is not None])
    qdd = [None] * tree.n
    for i in range(tree.n):                         # roll-out, lines 15-17, for i in S (roots first)
        qdd[i] = sw.rollout(i, abi[i], acc)         # q̈_i (line 16), a_i (line 17)
    passes.done("roll-out: q̈_i, λ_i, a_i", qdd, sw.lam)
    return qdd, sw.lam, sw.pivots, sw.elim


class Sweeps:
    """The state of ``solve``: the rows' stacks, L^A (upper entries keyed by row ids: global rows,
    then fresh ids for the rows an elimination creates), eliminations, multipliers."""

    def __init__(self, tree, probe, early, drop):
        self.tree, self.probe, self.early, self.drop = tree, probe, early, drop
        self.scale = max([1e-300] + [float(np.abs(probe([K[r, c] for r in range(K.shape[0]) for c in range(6)])).max())
                                     for own in tree.own for _, K in own])
        n = tree.n
        self.stacks = [Stack() for _ in range(n)]
        self.elim, self.ks, self.u, self.mu = [None] * n, [None] * n, [None] * n, [None] * n
        self.L, self.roots, self.pivots = {}, [], []
        self.lam = [0.0] * tree.cs.m
        self.new_id = iter(range(tree.cs.m, 10 ** 9))

    def nonzero(self, exprs):
        """Whether some of ``exprs`` is not identically zero (at the probe)."""
        live = [x for x in exprs if not is_zero(x)]
        return bool(live) and float(np.abs(self.probe(live)).max()) > ZERO * self.scale

    def zero_rows(self, rows):
        """Which rows are identically zero (at the probe)."""
        if not rows:
            return []
        vals = np.abs(self.probe([x for row in rows for x in row])).reshape(len(rows), 6).max(axis=1)
        return list(vals <= ZERO * self.scale)

    def start(self, k, c, p, tau):
        """The own rows (line 5) and what the backward sweep reads."""
        tree = self.tree
        self.c, self.tau, self.pA = c, tau, [list(x) for x in p]
        self.g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
        for i, own in enumerate(tree.targets(k, self.g)):
            for rows, K, lv in own:
                self.stacks[i].extend([[K[r, c_] for c_ in range(6)] for r in range(len(rows))], lv, list(rows),
                                      ("own", rows), True)
            if len(own) == 1 and own[0][1].shape[0] == 6 and own[0][1].is_constant() \
                    and np.linalg.matrix_rank(np.array(ca.DM(own[0][1]))) == 6:
                self.stacks[i].weld = "own"

    def backward(self, i, art):
        """Alg. 1 lines 7-12 at joint i (articulated_inertias' post hook), with the elimination
        of Sec. VIII where the policy says so; returns H^a's update."""
        tree, st, c = self.tree, self.stacks[i], self.c
        if art.free:
            self.pA[i] = vsub(self.pA[i], tree.base_wrench(i, tree.vslice(self.tau, i), self.g[i]))
            return None
        if art.multi:
            return self.backward_multi(i, art)
        self.u[i], pa = joint_backward(tree, i, art, self.pA[i], tree.vslice(self.tau, i)[0], c[i])
        more, K_up, l_up, ids_up, fresh = None, [], [], [], st.fresh
        if st.K:
            a, sgn, gb = axis_g(tree, i, art)
            kt = [row[a] for row in st.K] if a is not None else [tree.sq(i, row) for row in st.K]
            if st.fresh and self.early(tree, i, st, kt, self.nonzero):       # eliminate one row here
                l0 = [add(lr, dot(row, c[i])) for row, lr in zip(st.K, st.l)]
                du, gc = mul(art.Dinv, self.u[i]), dot(gb, c[i])
                t = (sub(du, gc), 1) if sgn > 0 else (add(du, gc), -1)     # t = ±D⁻¹u − gbᵀ a_b
                self.elim[i], K_up, l_up, upd, sl = eliminate(kt, st.K, l0, gb, t, a, art.D)
                ids_up = [next(self.new_id) for _ in K_up]
                more = symmetric(upd, 6)
                pa = [add(pa[x], mul(sl, self.elim[i].Kt[x])) for x in range(6)]
            else:                                                       # rows pass (Remark 8 / Alg. 1)
                _, K_up, l_up = propagate(tree, i, art, st.K, st.l, self.u[i], c[i])
                ids_up = list(st.ids)
                if self.nonzero(kt):
                    self.ks[i], fresh = kt, False
                    self.accumulate(st.ids, kt, art.Dinv)
            st.keep = [not z for z in self.zero_rows(K_up)] if fresh else [True] * len(K_up)
            K_up, l_up, ids_up = ([x for x, kp in zip(xs, st.keep) if kp] for xs in (K_up, l_up, ids_up))
        self.pass_up(i, pa, K_up, l_up, ids_up, fresh)
        return more

    def backward_multi(self, i, art):
        """Alg. 1 lines 7-12 at a joint of several DoFs (a ball joint): the rows pass, with
        L^A += k_i D_i⁻¹ k_iᵀ (no early elimination here: the rows that pass are no longer fresh)."""
        tree, st, c = self.tree, self.stacks[i], self.c
        self.u[i], pa = joint_backward_multi(art, self.pA[i], tree.vslice(self.tau, i), c[i])
        K_up, l_up, ids_up, fresh = [], [], [], st.fresh
        if st.K:
            kt, K_up, l_up = propagate_multi(art, st.K, st.l, self.u[i], c[i])
            ids_up = list(st.ids)
            if self.nonzero([x for row in kt for x in row]):
                self.ks[i], fresh = kt, False
                for (p, q), e in art.gram(kt).items():
                    key = (st.ids[p], st.ids[q]) if st.ids[p] <= st.ids[q] else (st.ids[q], st.ids[p])
                    self.L[key] = add(self.L.get(key, 0.0), e)
            st.keep = [not z for z in self.zero_rows(K_up)] if fresh else [True] * len(K_up)
            K_up, l_up, ids_up = ([x for x, kp in zip(xs, st.keep) if kp] for xs in (K_up, l_up, ids_up))
        self.pass_up(i, pa, K_up, l_up, ids_up, fresh)

    def accumulate(self, ids, kt, Dinv):
        """L^A += k_i D_i⁻¹ k_iᵀ (Alg. 1 line 11; the sign of S_i cancels)."""
        w = [mul(x, Dinv) for x in kt]
        for a_, ra in enumerate(ids):
            for b_, rb in enumerate(ids):
                if ra <= rb and not (is_zero(w[a_]) or is_zero(kt[b_])):
                    self.L[(ra, rb)] = add(self.L.get((ra, rb), 0.0), mul(w[a_], kt[b_]))

    def pass_up(self, i, pa, K_up, l_up, ids_up, fresh):
        """p^a and the rows to the parent (K P_iᵀ ^iX_λ), or rows to the world at a fixed root."""
        tree, par = self.tree, self.tree.parent[i]
        if par >= 0:
            self.pA[par] = vadd(self.pA[par], transform_force(tree.T[i], pa))
            if K_up:
                up = self.stacks[par]
                up.extend([transform_force(tree.T[i], row) for row in K_up], l_up, ids_up, ("child", i, len(K_up)), fresh)
                alone = len(up.segments) == 1 and not tree.constrained[par]
                up.weld = "reduced" if alone and self.stacks[i].weld == "own" and self.elim[i] is not None else None
        elif K_up:                                  # rows left at a fixed root act on a_0 = −a_grav
            y = root_accel(tree, i, self.g)
            self.roots.append((i, ids_up, [add(lr, dot(row, y)) for row, lr in zip(K_up, l_up)], fresh, K_up))

    def resolve(self, abi):
        """The multipliers left at fixed roots (eq. 43) and free bases (eq. 47); returns the
        bases' accelerations a'_b (slid frames) in a per-body list."""
        tree = self.tree
        for i, ids, rhs, fresh, K_up in self.roots:
            if fresh:                    # no L^A: only identically zero (consistent) rows may get here
                if not all(self.zero_rows(K_up)):
                    raise ConstraintError(
                        f"pv_early: {sum(1 for z in self.zero_rows(K_up) if not z)} constraint rows reach the fixed "
                        f"root {tree.robot.bodies[i].name!r} unresolved: the constraints {tree.cs.specs} need more "
                        f"joints than the path to the world has (redundant or conflicting); use pv_soft")
                self.mu[i] = [0.0] * len(ids)
                continue
            out = {}                     # L_0 λ = l_0 + K_0 a_0, block by block
            for blk in linalg.blocks_of(self.L, ids):
                fac = linalg.ldl(linalg.local(self.L, blk), len(blk))
                self.pivots += fac[1]
                out.update(zip(blk, linalg.ldl_solve(fac, [rhs[ids.index(r)] for r in blk])))
            self.mu[i] = [out[r] for r in ids]
        acc = [None] * tree.n
        for b in (i for i in range(tree.n) if abi[i].free):
            acc[b] = self.base_solve(b, abi[b])
        return acc

    def base_solve(self, b, art):
        """a'_b and the multipliers of the rows at the free base b (linalg.saddle_solve:
        the branch blocks of L^A, then the rows no joint has seen, against the 6 DoF)."""
        st, S = self.stacks[b], self.tree.S[b]
        if not st.K:
            return art.omega([neg(x) for x in self.pA[b]])   # as aba.py
        coupled = {r for key in self.L for r in key}
        blocks = linalg.blocks_of(self.L, [r for r in st.ids if r in coupled])
        rest = [(r, row) for r, row in zip(st.ids, st.K) if r not in coupled]
        if self.drop:
            rest = [rest[j] for j in self.independent([row for _, row in rest])]
        blocks += [[r for r, _ in rest]] if rest else []
        a, lam_b, piv = linalg.saddle_solve(art.ldl, {r: mat_vec(S, row, transpose=True) for r, row in zip(st.ids, st.K)}, self.L,
                                        sorted(blocks, key=len), mat_vec(S, self.pA[b], transpose=True), dict(zip(st.ids, st.l)))
        self.pivots += piv
        hand_back(st, [lam_b.get(r, 0.0) for r in st.ids], self.lam, self.mu)
        return mat_vec(S, a)

    def independent(self, rows):
        """Indices of a maximal linearly independent subset of ``rows`` (6-lists) at the probe,
        earlier rows first (Gram-Schmidt on their values)."""
        vals = self.probe([x for row in rows for x in row]).reshape(len(rows), 6) if rows else np.zeros((0, 6))
        basis, keep = [], []
        for j, x in enumerate(vals):
            y = x - sum((x @ e) * e for e in basis) if basis else x
            if np.linalg.norm(y) > DEPENDENT * max(np.abs(vals).max(), 1e-300):
                basis.append(y / np.linalg.norm(y))
                keep.append(j)
        return keep

    def multipliers_through(self, i):
        """k_iᵀ λ_i^A at a joint of several DoFs (None without rows), the multipliers handed back."""
        st = self.stacks[i]
        if not st.K:
            return None
        it = iter(self.mu[i] if self.mu[i] is not None else [])
        vec = [next(it, 0.0) if kp else 0.0 for kp in st.keep]           # dropped rows: μ = 0
        hand_back(st, vec, self.lam, self.mu)
        if self.ks[i] is None:
            return None
        return [dot([row[c] for row in self.ks[i]], vec) for c in range(len(self.ks[i][0]))]

    def rollout(self, i, art, acc):
        """Alg. 1 lines 16-17 at joint i: q̈_i (a list) and a_i (into ``acc``), handing λ_i^A back
        to the rows (eq. 64 where the joint eliminated one)."""
        tree, par, st = self.tree, self.tree.parent[i], self.stacks[i]
        if art.free:
            return tree.base_qdd(i, acc[i], self.g[i])
        y = root_accel(tree, i, self.g) if par < 0 else transform_motion(tree.T[i], acc[par])
        if art.multi:
            qdd, acc[i] = joint_forward_multi(tree, i, art, y, self.c[i], self.u[i], self.multipliers_through(i))
            return qdd
        e = self.elim[i]
        extra, sign = 0.0, axis_g(tree, i, art)[1]
        if st.K:
            it = iter(self.mu[i] if self.mu[i] is not None else [])
            full = [next(it, 0.0) if kp else 0.0 for kp in st.keep]    # dropped rows: μ = 0
            if e is not None:                                           # k_iᵀ λ^A = ∓ cs μ̃
                (vec, extra), sign = rebuild(e, y, full), -sign
            else:
                vec = full
                if self.ks[i] is not None:                              # ± k_iᵀ λ_i^A (line 16)
                    extra = dot(self.ks[i], vec)
            hand_back(st, vec, self.lam, self.mu)
        q1, acc[i] = joint_forward(tree, i, art, y, self.c[i], self.u[i], extra, sign)
        return [q1]


def hand_back(st, vec, lam, mu):
    """Split the multipliers of a body's stack into its own rows and its children's."""
    pos = 0
    for seg in st.segments:
        if seg[0] == "own":
            for r in seg[1]:
                lam[r] = vec[pos]
                pos += 1
        else:
            mu[seg[1]] = vec[pos:pos + seg[2]]
            pos += seg[2]


def pv(robot, constraints, q, K_bodies, v, tau, k):
    tree = Tree(robot, constraints, q, K_bodies)
    tree.orthonormalize()
    probe = Probe(robot, q, K_bodies)
    v, tau = tree.local_inputs(v, tau)
    qdd, lam, pivots, _ = solve(tree, v, tau, k, probe, never_vanishing, drop=False)
    check_regular(probe, pivots, "pv", constraints)
    lam = tree.multipliers(lam)
    return {"vdot": column(tree.user_vdot([x for qi in qdd for x in qi], v)), "lam": column([neg(x) for x in lam])}


derivative = hard_derivative("pv", pv)
