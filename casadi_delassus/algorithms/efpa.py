"""efpa — the Extended-Force-Propagator Algorithm for Λ⁻¹ = J M⁻¹ Jᵀ.

EFPA paper ../shared/papers/003_3d6496c5334b6d59.txt, Table I (Sec. IV: inward recursion
(6)-(11), outward recursion (12)-(14)), in the constraint-space form of the PV-OSIMr paper
../shared/papers/000_82174d5af858539c.txt, Alg. 2, in local link frames:

  backward sweep  H^A_λ(i) += ^λP_i H^A_i                 (articulated inertias, eq. (10))
                  ^λK_j = ^iK_j ^λP_iᵀ,  j ∈ ES(i)          (extended propagators, eq. (11)/(12))
  forward sweep   (⁰Ω_i ^iK_jᵀ) = ^λP_iᵀ (⁰Ω_λ ^λK_jᵀ) + ^λΩ_i ^iK_jᵀ,  j ∈ ES(i)   (eq. (13))
  assembly        ⁰Λ⁻¹_ij = ^cK_i (⁰Ω_c ^cK_jᵀ),  c = cca(i, j)                      (eq. (14))

with ^λP_i = ^iX_λᵀ (1 − U_i D_i⁻¹ S_iᵀ), ^λΩ_i = S_i D_i⁻¹ S_iᵀ, U_i = H^A_i S_i, D_i = S_iᵀ U_i.

The articulated-inertia sweep (``articulated``; also used by kjr) is this module's own,
written before the shared ``articulated.py`` existed: ``Projection`` holds one joint's
U, D⁻¹ and applies the force and motion projections with their structural zeros (what
crosses joint i has no component along S_i; CasADi cannot see d − d·d/d = 0).  A free
joint's D is LDLᵀ-factored, never inverted.

Beyond Alg. 2, two identities cut work without changing the sweeps: ⁰Λ⁻¹_ab may be formed as
(^cK_b (⁰Ω_c ^cK_aᵀ))ᵀ when that K has more structural zeros, and a diagonal block below a
parent λ as ^λK_a (⁰Ω_λ ^λK_aᵀ) + (K_a S) D⁻¹ (K_a S)ᵀ (the last forward step folded in,
since K_a ^λP_iᵀ = ^λK_a is known from the backward sweep)."""
from __future__ import annotations

import numpy as np

from . import linalg
from . import local_frames as lf
from ..model.robot import cross_matrix


def rigid_inertia(body):
    """Numeric 6x6 spatial inertia about the body origin as nested lists."""
    c = np.asarray(body.com, float)
    cx = cross_matrix(c)
    return np.block([[body.inertia - body.mass * cx @ cx, body.mass * cx],
                     [-body.mass * cx, body.mass * np.eye(3)]]).tolist()


def _axis(S):
    """k when S is the single signed unit column ±e_k (free column pick), else None."""
    if S.shape[1] == 1 and np.count_nonzero(S) == 1 and abs(S).max() == 1.0:
        return int(np.flatnonzero(S[:, 0])[0])
    return None


class Projection:
    """Joint quantities from the completed articulated inertia H = H^A_i:
    U = H S, D = Sᵀ H S (LDLᵀ-factored, reciprocals once), and the projections
    ``force``: (1 − U D⁻¹ Sᵀ) f, ``motion``: (1 − S D⁻¹ Uᵀ) a + S D⁻¹ Sᵀ f,
    ``omega``: S D⁻¹ Sᵀ f, ``inertia``: H − U D⁻¹ Uᵀ."""

    def __init__(self, body, H, order=None):
        self.body = body
        self.S = body.joint.motion_subspace()
        if order is not None:              # elimination order of D's LDLᵀ (columns of S)
            self.S = self.S[:, order]
        self.k = _axis(self.S)
        self.H = H
        self._neg = {}
        if self.k is not None:
            k = self.k
            self.Dinv = 1 / H[k][k]
            # g = U D⁻¹ (the sign of S cancels); g_k = 1 exactly, kept implicit
            self.g = [0 if l == k else H[k][l] * self.Dinv for l in range(6)]
            return
        S, nv = self.S, self.S.shape[1]
        self.U = [[lf.dot(row, S[:, c]) for c in range(nv)] for row in H]
        upper = {(a, b): lf.dot(S[:, a], [self.U[r][b] for r in range(6)]) for a in range(nv) for b in range(a, nv)}
        self.L, _, self.Dinvs = linalg.ldl(upper, nv)
        # indices along which S is a coordinate selection: projected quantities vanish there
        self.zero = [int(np.flatnonzero(S[:, c])[0]) for c in range(nv)
                     if np.count_nonzero(S[:, c]) == 1 and abs(S[:, c]).max() == 1.0]

    def solve(self, t):
        """D⁻¹ t for an nv-list, by the LDLᵀ factors."""
        n = len(t)
        z = []
        for i in range(n):
            z.append(t[i] - lf.dot([self.L.get((i, j), 0) for j in range(i)], z))
        x = [0] * n
        for i in reversed(range(n)):
            x[i] = z[i] * self.Dinvs[i] - lf.dot([self.L.get((j, i), 0) for j in range(i + 1, n)], x[i + 1:])
        return x

    def inertia(self):
        H, k = self.H, self.k
        if k is not None:
            return lf.sym(6, lambda a, b: 0 if k in (a, b) else H[a][b] - H[a][k] * self.g[b])
        W = [self.solve(list(self.U[r])) for r in range(6)]          # rows of U D⁻¹
        return lf.sym(6, lambda a, b: 0 if a in self.zero or b in self.zero else
                      H[a][b] - lf.dot(W[a], self.U[b]))

    def force(self, f):
        k = self.k
        if k is not None:
            return [0 if l == k else f[l] - self.g[l] * f[k] for l in range(6)]
        y = self.solve([lf.dot(self.S[:, c], f) for c in range(self.S.shape[1])])
        return [0 if l in self.zero else f[l] - lf.dot(self.U[l], y) for l in range(6)]

    def motion(self, a, f=None):
        k = self.k
        if k is not None:
            out = list(a)
            rest = [a[l] if l != k else 0 for l in range(6)]
            if f is None or lf.is_zero(f[k]):
                out[k] = self.neg_g_dot(rest)                        # a_k − gᵀa with g_k = 1
            else:
                out[k] = self.Dinv * (f[k] - lf.dot(self.H[k], rest))
            return out
        nv = self.S.shape[1]
        t = [lf.dot([self.U[r][c] for r in range(6)], a) - (lf.dot(self.S[:, c], f) if f is not None else 0)
             for c in range(nv)]
        y = self.solve(t)
        return [a[l] - lf.dot(self.S[l, :], y) for l in range(6)]

    def neg_g_dot(self, a):
        """−Σ_{l≠k} g_l a_l; the sign rides on one −g_l per joint, not one NEG per use."""
        terms = [(l, a[l]) for l in range(6) if l != self.k and not lf.is_zero(self.g[l]) and not lf.is_zero(a[l])]
        if not terms:
            return 0
        l0, x0 = terms[0]
        if l0 not in self._neg:
            self._neg[l0] = -self.g[l0]
        acc = self._neg[l0] * x0
        for l, x in terms[1:]:
            acc = acc - self.g[l] * x
        return acc

    def congruence(self, N):
        """(1 − S D⁻¹ Uᵀ) N (1 − U D⁻¹ Sᵀ) + S D⁻¹ Sᵀ for a symmetric motion-type N: the
        inverse inertia ⁰Ω_i from N = ^iX_λ ⁰Ω_λ ^iX_λᵀ.  Row and column k of N are never
        read (they are replaced), the rest of N passes unchanged."""
        k = self.k
        if k is not None:
            y = [None if b == k else self.neg_g_dot([N[l][b] if l != k else 0 for l in range(6)]) for b in range(6)]
            ykk = self.Dinv - lf.dot(self.g, [0 if b == k else y[b] for b in range(6)])
            return lf.sym(6, lambda a, b: ykk if a == b == k else y[b] if a == k else y[a] if b == k else N[a][b])
        nv = self.S.shape[1]
        W = [self.solve([self.U[r][c] for c in range(nv)]) for r in range(6)]     # rows of U D⁻¹
        M = [[(1.0 if a == b else 0.0) - lf.dot(self.S[a, :], W[b]) for b in range(6)] for a in range(6)]
        MN = lf.matmul(M, N)
        Om = self.omega_matrix()
        return lf.sym(6, lambda a, b: lf.dot(MN[a], M[b]) + Om[a][b])

    def omega_matrix(self):
        """S D⁻¹ Sᵀ as a symmetric 6x6."""
        cols = [self.omega([1.0 if r == c else 0.0 for r in range(6)]) for c in range(6)]
        return lf.sym(6, lambda a, b: cols[b][a])

    def omega(self, f):
        if self.k is not None:
            return [self.Dinv * f[self.k] if l == self.k else 0 for l in range(6)]
        y = self.solve([lf.dot(self.S[:, c], f) for c in range(self.S.shape[1])])
        return [lf.dot(self.S[l, :], y) for l in range(6)]


def articulated(robot, X):
    """Backward sweep: H^A_λ(i) += ^iX_λᵀ (H^A_i − U_i D_i⁻¹ U_iᵀ) ^iX_λ (EFPA paper eq. (10));
    returns the Projection of every joint."""
    H = [rigid_inertia(b) for b in robot.bodies]
    P = [None] * robot.n_bodies
    for i in reversed(range(robot.n_bodies)):
        P[i] = Projection(robot.bodies[i], H[i])
        p = robot.parent(i)
        if p >= 0:
            T = X[i].inertia_t(P[i].inertia())
            H[p] = lf.sym(6, lambda a, b: H[p][a][b] + T[a][b])
    return P


def support(robot, constraints):
    """ES(i): the constraints (end-effectors) whose link is i or a descendant of i."""
    ES = [[] for _ in range(robot.n_bodies)]
    for e, c in enumerate(constraints.constraints):
        for i in robot.ancestors(c.body):
            ES[i].append(e)
    return ES


def cca(robot, a, b):
    """Closest common ancestor of links a and b (either itself included); None when they
    hang from different roots (a forest), so they do not couple."""
    anc = set(robot.ancestors(a))
    return next((i for i in robot.ancestors(b) if i in anc), None)


def sparse_first(P, vectors):
    """The root's Projection with D's LDLᵀ eliminating first the S-coordinates in which the
    force vectors to solve for are most often exact zeros (a zero leading entry skips a
    whole column of the forward substitution)."""
    if P.k is not None:
        return P
    nv = P.S.shape[1]
    zeros = [sum(lf.is_zero(lf.dot(P.S[:, c], f)) for f in vectors) for c in range(nv)]
    order = sorted(range(nv), key=lambda c: -zeros[c])
    return Projection(P.body, P.H, order) if order != list(range(nv)) else P


def rows(K):
    return [[K[r, c] for c in range(6)] for r in range(K.shape[0])]


def propagate_rows(robot, constraints, X, P, K_bodies, ES):
    """^λK_j = ^iK_j ^λP_iᵀ for every ancestor link of j (Alg. 2 lines 3-11): K_at[j][i]."""
    K_at = [{c.body: rows(K)} for c, K in zip(constraints.constraints, K_bodies)]
    for i in reversed(range(robot.n_bodies)):
        p = robot.parent(i)
        if p >= 0:
            for j in ES[i]:
                K_at[j][p] = [X[i].force_t(P[i].force(f)) for f in K_at[j][i]]
    return K_at


def assemble(robot, constraints, blocks):
    """Λ⁻¹ from its upper blocks {(a, b): m_a x m_b lists}, diagonal blocks symmetric."""
    m = constraints.m
    out = [[0] * m for _ in range(m)]
    for (a, b), B in blocks.items():
        ra, rb = constraints.offsets[a], constraints.offsets[b]
        for r, row in enumerate(B):
            for s, e in enumerate(row):
                out[ra + r][rb + s] = out[rb + s][ra + r] = e
    return lf.to_sx(out)


def diagonal(robot, P, K_at, Phi, ES, a, i):
    """K_a ⁰Ω_i K_aᵀ, upper entries once.  When no other constraint needs ⁰Ω_i ^iK_aᵀ, the
    last forward step may be folded in: K_a ^λP_iᵀ = ^λK_a (from the backward sweep), so
    K_a ⁰Ω_i K_aᵀ = ^λK_a (⁰Ω_λ ^λK_aᵀ) + (K_a S_i) D_i⁻¹ (K_a S_i)ᵀ — cheaper unless K_a is
    sparse and numeric (then K_a ⁰Ω_i K_aᵀ is nearly free); the cheaper form is taken."""
    p = robot.parent(i)
    Ka = K_at[a][i]
    if p >= 0 and ES[i] == [a]:
        W = [P[i].omega(f) for f in Ka]
        step = 24 * len(Ka)                                  # one forward step (6-vector columns)
        if lf.gram_cost(K_at[a][p], Phi[a][p]) + lf.gram_cost(Ka, W) + 2 * len(Ka) ** 2 < \
                step + lf.gram_cost(Ka, Phi[a][i]):
            Kp, Pp = K_at[a][p], Phi[a][p]
            return lf.sym(len(Ka), lambda r, s: lf.dot(Kp[r], Pp[s]) + lf.dot(Ka[r], W[s]))
    return lf.sym(len(Ka), lambda r, s: lf.dot(Ka[r], Phi[a][i][s]))


def sweeps(robot, constraints, q, K_bodies):
    """All of EFPA's intermediate quantities, by sweep: {'X', 'P', 'ES', 'K_at', 'Phi',
    'blocks'} (Phi[j][i]: columns of ⁰Ω_i ^iK_jᵀ; blocks: upper blocks of Λ⁻¹)."""
    X = lf.transforms(robot, q)
    P = articulated(robot, X)
    ES = support(robot, constraints)
    K_at = propagate_rows(robot, constraints, X, P, K_bodies, ES)
    for r in range(robot.n_bodies):
        if robot.parent(r) < 0:
            P[r] = sparse_first(P[r], [f for j in ES[r] for f in K_at[j][r]])
    # forward sweep (Alg. 2 lines 12-17): Phi[j][i] = columns of ⁰Ω_i ^iK_jᵀ
    Phi = [dict() for _ in constraints.constraints]
    for i in range(robot.n_bodies):
        p = robot.parent(i)
        for j in ES[i]:
            if p >= 0:
                Phi[j][i] = [P[i].motion(X[i].motion(col), f) for col, f in zip(Phi[j][p], K_at[j][i])]
            else:
                Phi[j][i] = [P[i].omega(f) for f in K_at[j][i]]
    # assembly (Alg. 2 lines 18-19): ⁰Λ⁻¹_ab = ^cK_a (⁰Ω_c ^cK_bᵀ), upper blocks only
    body = [c.body for c in constraints.constraints]
    blocks = {}
    for a in range(len(body)):
        for b in range(a + 1, len(body)):
            c = cca(robot, body[a], body[b])
            if c is None:
                continue
            # ^cK_a (⁰Ω_c ^cK_bᵀ) or, equal by symmetry, (^cK_b (⁰Ω_c ^cK_aᵀ))ᵀ: the one
            # whose K has more structural zeros
            if lf.gram_cost(K_at[a][c], Phi[b][c], False) <= lf.gram_cost(K_at[b][c], Phi[a][c], False):
                blocks[(a, b)] = [[lf.dot(Ka, Pb) for Pb in Phi[b][c]] for Ka in K_at[a][c]]
            else:
                Bt = [[lf.dot(Kb, Pa) for Pa in Phi[a][c]] for Kb in K_at[b][c]]
                blocks[(a, b)] = [list(col) for col in zip(*Bt)]
        blocks[(a, a)] = diagonal(robot, P, K_at, Phi, ES, a, body[a])
    return {"X": X, "P": P, "ES": ES, "K_at": K_at, "Phi": Phi, "blocks": blocks}


def delassus(robot, constraints, q, K_bodies):
    return {"delassus": assemble(robot, constraints, sweeps(robot, constraints, q, K_bodies)["blocks"])}
