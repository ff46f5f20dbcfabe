"""pv_early — PV with early elimination of the multipliers: rank-1 Householder elimination at
every joint, O(n + m).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. VIII, eqs. (56)-(68), on top of Alg. 1
(see pv.py for the notation).  At a 1-DoF joint the constraint rows K_i^A that reach it gain
the rank-1 term L_i^A = k_i D_i⁻¹ k_iᵀ, k_i = K_i^A S_i (eq. 57; L is reset to 0 after every
elimination, so L_i^A never needs to be stored, Remark 6).  Its SVD is a Householder reflection
(eqs. 65-67):

    w = k̃ + copysign(‖k̃‖, k̃_1) e_1,   Q = 1 − 2 w wᵀ / wᵀw,   Q k̃ = −copysign(‖k̃‖, k̃_1) e_1,
    Σ_i = ‖k_i‖² / D_i,

computed from k̃ = K_i^A e_a (k_i = ±k̃ for S_i = ±e_a).  ``copysign`` makes sign(0) = +1: a zero
pivot k̃_1 = 0 (common at q = 0) needs no row permutation (Remark 7).  In the rotated basis
[K̃; K̂] = Q K_i^A P_iᵀ, [l̃; l̂] = Q l_i the first multiplier is eliminated at once (eqs. 62-63):

    μ̃ = Σ⁻¹ (K̃ y + l̃),  y = ^iX_λ a_λ,       H_i^a ← H_i^a + K̃ᵀ Σ⁻¹ K̃,   p_i^a ← p_i^a + Σ⁻¹ l̃ K̃ᵀ

(p = −f, so eq. (63)'s f-update changes sign), and only K̂, l̂ (one row fewer) are passed to the
parent.  The roll-out rebuilds λ_i^A = Q [μ̃; μ̂] (eq. 64) with μ̂ from the parent, and the
joint term k_iᵀ λ_i^A = ±(Q k̃)ᵀ[μ̃; μ̂] is one product.  Rows that reach the floating base are
resolved there with its 6 DoF (eq. 47 with L_b^A = 0): λ = (K_b H_b⁻¹ K_bᵀ)⁻¹ (l_b − K_b H_b⁻¹ p_b).

Structure decided at trace time, from one seeded random configuration (dynamics_sweeps.Probe):
a joint eliminates a row only if k̃ is not identically zero there (Remark 8: e.g. a point on
the joint's own axis); rows whose entries are identically zero (the left-over of redundant
constraints, e.g. two welds on one link, Remark 9) are dropped with multiplier 0.  So redundant
but consistent constraints keep working (v̇ is unique; λ is one of the valid multipliers).
At run time a joint whose k̃ is exactly zero (a configuration where the rows lose rank, e.g. a
stretched knee) eliminates nothing (Σ⁻¹ = 0, Q = 1): no NaN or Inf, but the row that the
structure drops there is then not enforced — exact hard constraints at such configurations
need pv or ltl.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..errors import ConstraintError
from ..spatial import symmetric
from . import dynamics_sweeps as ds
from . import linalg
from .articulated import articulated_inertias
from .pv import propagate

EPS = 1e-300          # keeps 1/(‖k‖(‖k‖ + |k₁|)) finite when k = 0 exactly (then w = 0)
ZERO = 1e-9           # relative size below which a probed quantity is identically zero


class Stack:
    """The rows that reach a body: K rows (6-lists), l, and where they come from (segments
    ('own', global rows) or ('child', child body, count)) to hand the multipliers back."""

    def __init__(self):
        self.K, self.l, self.segments = [], [], []
        self.keep = []              # which of the rows passed on (K P_iᵀ, after Q) survive the probe
        self.root_rows = None       # rows left over at a fixed root

    def extend(self, K, l, segment):
        self.K += K
        self.l += l
        self.segments.append(segment)


class Elimination:
    """What the roll-out needs at a joint that eliminated a row: K̃, l̃, Σ⁻¹, Q (applied by
    ``reflect``) and cs with (Q k̃)_1 = −cs."""

    def __init__(self, Kt, lt, sig, Q, cs):
        self.Kt, self.lt, self.sig, self.Q, self.cs = Kt, lt, sig, Q, cs


def householder(kt):
    """Q as (w, β = 2 / wᵀw) and cs = copysign(‖k̃‖, k̃_1) (sign(0) = +1), ‖k̃‖²; Q k̃ = −cs e_1."""
    nrm2 = ds.dot(kt, kt)
    nrm = ca.sqrt(nrm2)
    cs = ca.copysign(nrm, kt[0]) if not ds.is0(kt[0]) else nrm
    w = [ds.add(kt[0], cs)] + list(kt[1:])
    beta = 1 / (nrm * (nrm + (ca.fabs(kt[0]) if not ds.is0(kt[0]) else 0.0)) + EPS)   # wᵀw = 2‖k‖(‖k‖ + |k₁|)
    return (w, beta), cs, nrm2


def numeric_reflection(kv):
    """A numeric orthogonal Q with Q k = −cs e_1 for a numeric k (a row swap when k = ±e_r, so
    that applying it costs nothing), and cs."""
    m = len(kv)
    nz = np.flatnonzero(kv)
    Q = np.eye(m)
    if len(nz) == 1 and abs(abs(kv[nz[0]]) - 1) < 1e-15:
        r = int(nz[0])
        Q[[0, r]] = Q[[r, 0]]
        return Q, -float(kv[r])
    nrm = float(np.linalg.norm(kv))
    cs = nrm if kv[0] >= 0 else -nrm
    w = kv.copy()
    w[0] += cs
    return np.eye(m) - 2 * np.outer(w, w) / (w @ w), cs


def reflect(Q, cols):
    """Q x for each column x: Q numeric (a matrix) or (w, β) with Q = 1 − β w wᵀ."""
    if isinstance(Q, np.ndarray):
        return [ds.mat_vec(Q, x) for x in cols]
    w, beta = Q
    out = []
    for x in cols:
        bt = ds.mul(beta, ds.dot(w, x))
        out.append([ds.sub(xi, ds.mul(wi, bt)) for xi, wi in zip(x, w)])
    return out


def eliminate(kt, K, l0, gb, t, a, D):
    """Eqs. (60)-(63) at one 1-DoF joint: (Elimination, K̂, l̂, H^a update (upper entries), Σ⁻¹ l̃).

    K are the rows K_i^A that reach the joint (not yet projected), l0 = l_i + K_i^A a_b,i, and
    (with k_i = ±k̃ for S_i = ±e_a, else k̃ = k_i = K_i^A S_i) the projection is K_i^A P_iᵀ =
    K − k̃ gbᵀ and the shifted l is l0 + k̃ t (eq. 42d; gb = Ū_i without the sign of S_i,
    t = ±D_i⁻¹ u_i − gbᵀ a_b,i, passed as (t, sign) below).  Since Q k̃ = −cs e_1, Q K P_iᵀ =
    Q K + cs e_1 gbᵀ and Q (l0 + k̃ t) = Q l0 − cs t e_1: only the eliminated first row needs the
    projection; the rows passed on are rows 2.. of Q K (their component along S_i is exactly 0)."""
    m = len(kt)
    if all(isinstance(x, float) or x.is_constant() for x in kt):
        Q, cs = numeric_reflection(np.array([float(x) for x in kt]))
        nrm2 = cs * cs
        sig = ds.mul(D, 1.0 / nrm2)
    elif m == 1:                                     # Q = 1: Σ⁻¹ = D / k², (Q k)_1 = k
        Q, cs, nrm2 = np.eye(1), -kt[0], ds.mul(kt[0], kt[0])
        sig = ca.if_else(nrm2 > 0, D / nrm2, 0)
    else:
        Q, cs, nrm2 = householder(kt)
        sig = ca.if_else(nrm2 > 0, D / nrm2, 0)      # Σ⁻¹ = D / ‖k‖² (0 if k = 0 exactly)
    cols = {col: [row[col] for row in K] for col in range(6) if col != a}
    QK = dict(zip(cols, reflect(Q, list(cols.values()))))
    Ql = reflect(Q, [l0])[0]
    Kt = [0.0 if col == a else ds.add(QK[col][0], ds.mul(cs, gb[col])) for col in range(6)]
    tv, tsign = t
    lt = (ds.sub if tsign > 0 else ds.add)(Ql[0], ds.mul(cs, tv))
    sK = [ds.mul(sig, x) for x in Kt]
    more = {(x, y): ds.mul(sK[x], Kt[y]) for x in range(6) for y in range(x, 6)}
    up = [[0.0 if col == a else QK[col][r] for col in range(6)] for r in range(1, m)]
    return Elimination(Kt, lt, sig, Q, cs), up, Ql[1:], more, ds.mul(sig, lt)


def pv_early(robot, constraints, q, K_bodies, v, tau, k, rec=None):
    rec = rec or (lambda *a: None)
    tree = ds.Tree(robot, constraints, q, K_bodies)
    probe = ds.Probe(robot, q, K_bodies)
    scale = max([1e-300] + [float(np.abs(probe([K[r, c] for r in range(K.shape[0]) for c in range(6)])).max())
                            for own in tree.own for _, K in own])
    vel, c, _ = tree.velocities(v)
    p = tree.bias_forces(vel)
    g = tree.gravity([i for i in range(tree.n) if tree.constrained[i] or tree.is_free(i)])
    rec("first forward sweep: v_i, a_b,i, p_i", vel, c, p)
    pA = [list(x) for x in p]
    u = [None] * tree.n
    stacks = [Stack() for _ in range(tree.n)]
    for i, own in enumerate(tree.targets(k, g)):
        for rows, K, lv in own:
            stacks[i].extend([[K[r, c_] for c_ in range(6)] for r in range(len(rows))], lv, ("own", rows))
    elim = [None] * tree.n
    bases = []

    def noise(rows):
        """Which rows are identically zero (at the probe)."""
        if not rows:
            return []
        vals = np.abs(probe([x for row in rows for x in row])).reshape(len(rows), 6).max(axis=1)
        return list(vals <= ZERO * scale)

    def backward(i, J):
        """Alg. 1 lines 7-12 at joint i, with the elimination of Sec. VIII; returns H^a's update."""
        par = tree.parent[i]
        st = stacks[i]
        if J.free:
            pA[i] = ds.vsub(pA[i], tree.base_wrench(i, tree.vslice(tau, i)))
            bases.append(i)
            return None
        u[i], pa = ds.joint_backward(tree, i, J, pA[i], tree.vslice(tau, i)[0], c[i])
        more, K_up, l_up = None, [], []
        if st.K:
            a, sgn, gb = ds.axis_g(tree, i, J)
            kt = [row[a] for row in st.K] if a is not None else [tree.sq(i, row) for row in st.K]
            if float(np.abs(probe(kt)).max()) > ZERO * scale:        # eliminate one row here
                l0 = [ds.add(lr, ds.dot(row, c[i])) for row, lr in zip(st.K, st.l)]
                du, gc = ds.mul(J.Dinv, u[i]), ds.dot(gb, c[i])
                t = (ds.sub(du, gc), 1) if sgn > 0 else (ds.add(du, gc), -1)     # t = ±D⁻¹u − gbᵀ a_b
                elim[i], K_up, l_up, upd, sl = eliminate(kt, st.K, l0, gb, t, a, J.D)
                more = symmetric(upd, 6)
                pa = [ds.add(pa[x], ds.mul(sl, elim[i].Kt[x])) for x in range(6)]
            else:                                                    # Remark 8: nothing to eliminate
                _, K_up, l_up = propagate(tree, i, J, st.K, st.l, u[i], c[i])
            st.keep = [not z for z in noise(K_up)]
            K_up = [row for row, kp in zip(K_up, st.keep) if kp]
            l_up = [x for x, kp in zip(l_up, st.keep) if kp]
        if par >= 0:
            pA[par] = ds.vadd(pA[par], ds.force(tree.T[i], pa))
            if K_up:
                stacks[par].extend([ds.force(tree.T[i], row) for row in K_up], l_up, ("child", i, len(K_up)))
        elif K_up:
            st.root_rows = (K_up, l_up)        # left at a fixed root: only consistent (zero) rows
        return more

    abi = articulated_inertias(robot, tree.T, post=backward)
    rec("backward: H^A, p^A, u, K^A, l with early elimination", [J.HA for J in abi],
        [pA[b] for b in bases], u, [stacks[b].K for b in bases], [stacks[b].l for b in bases],
        [(e.Kt, e.lt, e.sig) for e in elim if e is not None])
    for i in range(tree.n):
        rr = stacks[i].root_rows
        if rr is not None and not all(noise(rr[0])):
            raise ConstraintError(
                f"pv_early: {sum(1 for z in noise(rr[0]) if not z)} constraint rows reach the fixed root "
                f"{robot.bodies[i].name!r} unresolved: the constraints {constraints.specs} need more joints "
                f"than the path to the world has (redundant or conflicting); use pv_soft")

    # -- multipliers passed up, resolved at the bases --------------------------------------------------
    mu = [None] * tree.n                 # multipliers of the rows each body passed to its parent
    acc, qdd = [None] * tree.n, [None] * tree.n
    lam = [0.0] * constraints.m
    for b in bases:
        J, st = abi[b], stacks[b]
        m = len(st.K)
        if m:
            Lf, _, dinv = J.ldl
            S = tree.S[b]
            B = [[ds.mat_t_vec(S, row)[x] for row in st.K] + [ds.mat_t_vec(S, pA[b])[x]] for x in range(6)]
            W = linalg.forward_substitute(Lf, 6, B)
            A, rhs = {}, list(st.l)
            for x in range(6):
                ws = [ds.mul(e, dinv[x]) for e in W[x]]
                for j in range(m):
                    rhs[j] = ds.sub(rhs[j], ds.mul(ws[j], W[x][m]))
                    for j2 in range(j, m):
                        A[(j, j2)] = ds.add(A.get((j, j2), 0.0), ds.mul(ws[j], W[x][j2]))
            lam_b = ds.ldl_solve(linalg.ldl(A, m), rhs)
            f = list(pA[b])
            for j in range(m):
                f = ds.vadd(f, [ds.mul(e, lam_b[j]) for e in st.K[j]])
        else:
            lam_b, f = [], pA[b]
        y = ds.free_solve(tree, b, J, f)
        acc[b] = [(-e if not ds.is0(e) else 0.0) for e in y]
        qdd[b] = tree.base_qdd(b, acc[b], g[b])
        hand_back(st, lam_b, lam, mu)
    rec("base solve (eq. 47 with L_b = 0)", qdd, [mu[i] for i in range(tree.n) if mu[i] is not None])

    # -- roll-out ---------------------------------------------------------------------------------
    for i in range(tree.n):
        J, par, st = abi[i], tree.parent[i], stacks[i]
        if J.free:
            continue
        y = ds.root_accel(tree, i, g) if par < 0 else ds.motion(tree.T[i], acc[par])
        e = elim[i]
        extra, sign = 0.0, tree.axis[i][1]
        if st.K:
            it = iter(mu[i] if mu[i] is not None else [])              # a fixed root: μ̂ = 0
            full = [next(it, 0.0) if kp else 0.0 for kp in st.keep]    # dropped rows: μ = 0
            if e is not None:
                mu1 = ds.mul(e.sig, ds.add(ds.dot(e.Kt, y), e.lt))      # eq. (62)
                vec = reflect(e.Q, [[mu1] + full])[0]                   # eq. (64): λ^A = Q [μ̃; μ̂]
                extra, sign = ds.mul(e.cs, mu1), -sign                  # k_iᵀ λ^A = ∓ cs μ̃
            else:                                       # Remark 8: k_i ≡ 0, no joint term
                vec = full
            hand_back(st, vec, lam, mu)
        q1, acc[i] = ds.joint_forward(tree, i, J, y, c[i], u[i], extra, sign)
        qdd[i] = [q1]
    rec("roll-out: q̈_i, λ_i, a_i", qdd, lam)
    return {"vdot": ds.outputs_vdot(tree, qdd), "lam": ds.column([(-x if not ds.is0(x) else 0.0) for x in lam])}


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
