"""Analytical partial derivatives of inverse dynamics, O(n d): τ = RNEA(q, v, a) with respect to
q (tangent space) and v, and of the constrained links' accelerations γ_i = K_i a_i, for the
dynamics solvers' Jacobians (aba, pv, ltl: ∂v̇/∂x = −M⁻¹ ∂τ/∂x, and the KKT system).

Method: Carpentier & Mansard, "Analytical derivatives of rigid body dynamics algorithms" (RSS 2018)
and Pinocchio's rnea-derivatives: differentiate the RNEA once, in one coordinate frame per tree,
where a tangent perturbation δq_j turns everything below joint j rigidly by its motion S_j.  Our
derivation, with ν_i, α_i the bodies' spatial velocities and accelerations (α_0 = −a_grav, PV
paper ../shared/papers/004_52dd6d88d839fc14.txt Sec. III-B2), I_i their inertias, f_i = I_i α_i +
ν_i ×* I_i ν_i − f_ext,i, F_i = Σ_{l ⪰ i} f_l and τ_k = S_kᵀ F_b(k), p the parent of joint j:

    Ṡ_j = ν_p × S_j,   S̈_j = α_p × S_j + ν_p × Ṡ_j,   T_j = Ṡ_j + ν_b(j) × S_j  (= 2 Ṡ_j, 1 DoF)
    ∂ν_l/∂q_j = S_j × ν_l + Ṡ_j,   ∂α_l/∂q_j = S_j × α_l + S̈_j + Ṡ_j × ν_l,   ∂α_l/∂v_j = S_j × ν_l + T_j
    ∂f_l/∂q_j = S_j ×* f_l + I_l S̈_j + B_l Ṡ_j,      ∂f_l/∂v_j = I_l T_j + B_l S_j     (l ⪰ b(j))

with B_l x = ν_l ×* I_l x + x ×* I_l ν_l − I_l (ν_l × x) (f is covariant: only what does not turn
with the body, α_p and ν_p, leaves a term).  Writing I = [[Ī, h×], [−h×, m]] about the frame's
origin and I ν = [σ; ρ], B = [[B̄, 0], [−2 ρ×, 0]] with B̄ = [ω×, Ī] − (v×h× + h×v×) − σ×: B reads
only the angular part of x, and its composite B^c = Σ B_l needs the composite symmetric part,
σ^c and ρ^c (nine numbers per body).  Summing over the subtree (composites I^c, B^c, F) and
projecting, the turning of S_k cancels the S_j ×* F term wherever S_k turns with joint j:

    b(j) ⪯ b(k):  ∂τ_k/∂q_j = y_k · S̈_j + z_k · Ṡ_j,ω      ∂τ_k/∂v_j = y_k · T_j + z_k · S_j,ω
    b(k) ≺ b(j):  ∂τ_k/∂q_j = S_k · (S_j ×* F_b(j) + I^c S̈_j + B^c Ṡ_j),  ∂τ_k/∂v_j = S_k · (I^c T_j + B^c S_j)

with y_k = I^c_b(k) S_k and z_k = (B^c_b(k)ᵀ S_k)_ω, and M_kj = y_k · S_j.  A constrained link's
rows K^c (K_i in the tree's frame, turning with the link) give, for b(j) ⪯ i, with S̈^true_j the
S̈_j of the true accelerations (α_0 = 0) and w = ν_i ×* K^c:

    ∂γ/∂q_j = K^c · S̈^true_j + w · Ṡ_j,     ∂γ/∂v_j = K^c · T_j + w · S_j,     J = K^c · S_j.

The frame of a tree is its root's body frame (its joint frame for a free root, where S is then
Pinocchio's unit columns and a perturbation of the base only turns gravity): every quantity is a
covariant expression evaluated at one instant, so any frame rigid with the root gives the same
numbers, and the root's S_j, ν, α cost nothing.  Free joints occur only at roots (Tree checks);
their six columns turn each other, so all 36 pairs take the first formula.  Everything is built
from symbolic/scalar.py's structural-zero arithmetic; the forward pass (placements, S_j, ν, α,
Ṡ, S̈) and the backward pass (composites, forces) are named passes.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..symbolic import passes
from ..symbolic.scalar import (add, cross, dot, force_cross, lin, motion_cross, mul, neg, sub, vadd, vsub)


ZERO6 = [0.0] * 6


def _rows_times(E, x):
    """E x for a 3x3 E (rows of scalars) and a 3-list x (numbers: by coefficient)."""
    if all(not hasattr(e, "is_constant") for e in x):
        return [lin([(x[s], E[r][s]) for s in range(3)]) for r in range(3)]
    return [dot(E[r], x) for r in range(3)]


def _times_transpose(E, N):
    """E Nᵀ for 3x3 E (rows) and a numeric 3x3 N: rows of E against rows of N."""
    return [[lin([(N[c, s], E[r][s]) for s in range(3)]) for c in range(3)] for r in range(3)]


def placements(tree):
    """(E_i, p_i) per body: the rotation taking body-i coordinates to its tree's frame (rows of
    scalars) and body i's origin there.  The frame is the root's body frame, or for a free root
    its joint frame (the body frame slid by o: p_root = o)."""
    E, p = [None] * tree.n, [None] * tree.n
    for i in range(tree.n):
        par, T = tree.parent[i], tree.T[i]
        if par < 0:
            E[i] = [[1.0 if r == c else 0.0 for c in range(3)] for r in range(3)]
            p[i] = [float(x) for x in T.o] if tree.is_free(i) else [0.0] * 3
            continue
        if T.k is not None:              # child -> parent = E_Tᵀ E_Jᵀ: the numeric part, then the plane
            M = _times_transpose(E[par], T.E_T)
            P = T.plane
            for row in M:
                x, y = row[P.i], row[P.j]
                row[P.i], row[P.j] = add(mul(x, P.c), mul(y, P.t)), sub(mul(y, P.c), mul(x, P.t))
            r = [float(x) for x in np.array(ca.DM(T.X.r)).ravel()] if T.X.r.is_constant() else [T.X.r[a] for a in range(3)]
        else:
            Xe = T.X.E
            M = [[dot(E[par][rr], [Xe[c, s] for s in range(3)]) for c in range(3)] for rr in range(3)]
            r = [T.X.r[a] for a in range(3)]
        E[i] = M
        p[i] = vadd(p[par], _rows_times(E[par], r))
    return E, p


def motion_columns(tree, E, p):
    """S_i's columns (6-lists) in the tree's frame, per body (Pinocchio's order for a free root)."""
    cols = []
    for i in range(tree.n):
        if tree.is_free(i):                          # [linear; angular] at the joint origin: unit
            unit = [[1.0 if r == c else 0.0 for r in range(6)] for c in range(6)]
            cols.append(unit[3:] + unit[:3])
            continue
        a, s = tree.axis[i]
        if a is not None:
            u = [E[i][r][a % 3] if s > 0 else neg(E[i][r][a % 3]) for r in range(3)]
            cols.append([u + cross(p[i], u)] if a < 3 else [[0.0] * 3 + u])
            continue
        S = tree.S[i][:, 0]
        w = _rows_times(E[i], [float(x) for x in S[:3]])
        cols.append([w + vadd(_rows_times(E[i], [float(x) for x in S[3:]]), cross(p[i], w))])
    return cols


class RigidInertia:
    """m (number), h = m c (3-list), Ī about the frame origin (3x3 symmetric, shared entries)."""

    def __init__(self, m, h, I):
        self.m, self.h, self.I = m, h, I

    def __add__(self, other):
        I = [[None] * 3 for _ in range(3)]
        for a in range(3):
            for b in range(a, 3):
                I[a][b] = I[b][a] = add(self.I[a][b], other.I[a][b])
        return RigidInertia(self.m + other.m, vadd(self.h, other.h), I)

    def times(self, x):
        """I x for a motion 6-list."""
        w, v = x[:3], x[3:]
        ang = vadd([dot(self.I[a], w) for a in range(3)], cross(self.h, v))
        return ang + vsub([mul(self.m, e) for e in v], cross(self.h, w))


def inertia_in_frame(body, o, E, p):
    """The body's inertia in its tree's frame: com c = p + E c_b, Ī = E Ī_c Eᵀ + m(|c|² 1 − c cᵀ)."""
    Ic = np.asarray(body.inertia, float)
    cb = np.asarray(body.com, float) - np.asarray(o, float)
    m = float(body.mass)
    c = vadd(_rows_times(E, [float(x) for x in cb]), p)
    A = [[lin([(Ic[s, col], E[r][s]) for s in range(3)]) for col in range(3)] for r in range(3)]   # E Ī_c
    h = [mul(m, x) for x in c]
    I = [[None] * 3 for _ in range(3)]
    for a in range(3):
        for b in range(a, 3):
            rot = dot(A[a], E[b])
            if a == b:
                o1, o2 = (a + 1) % 3, (a + 2) % 3
                I[a][a] = add(rot, add(mul(h[o1], c[o1]), mul(h[o2], c[o2])))
            else:
                I[a][b] = I[b][a] = sub(rot, mul(h[a], c[b]))
    return RigidInertia(m, h, I)


def transform_force_out(E, p, f):
    """A force 6-list in body coordinates, in the tree's frame: [E n + p × E f; E f]."""
    fl = _rows_times(E, f[3:])
    return vadd(_rows_times(E, f[:3]), cross(p, fl)) + fl


def transform_row_out(E, p, row):
    """A constraint row acting on body motions, acting on motions in the tree's frame (as a force)."""
    return transform_force_out(E, p, row)


class Partials:
    """The passes of one RNEA linearisation at (q, v, a), external forces ``f_ext`` ({body:
    6-list in body coordinates}) included in F: ``dtau(wrt)`` ({(k, j): e} for "q", "v"), ``mass()``
    (upper entries of M), and the constrained links' ``constraint_partials``."""

    def __init__(self, tree, v, a, f_ext=None):
        self.tree = tree
        n = tree.n
        self.E, self.p = placements(tree)
        self.S = motion_columns(tree, self.E, self.p)
        g_root = tree.gravity([])
        self.g = [None] * n                       # gravity in each tree's frame (per body: its root's)
        nu, al = [None] * n, [None] * n
        self.Sd, self.Sdd, self.Tv = [None] * n, [None] * n, [None] * n
        self.root = [None] * n
        for i in range(n):
            par = tree.parent[i]
            self.root[i] = i if par < 0 else self.root[par]
            if par < 0:
                self.g[i] = g_root[i]
                nu_p, al_p = ZERO6, [0.0] * 3 + [neg(x) for x in self.g[i]]
            else:
                self.g[i] = self.g[par]
                nu_p, al_p = nu[par], al[par]
            qd, qdd = tree.vslice(v, i), tree.vslice(a, i)
            S = self.S[i]
            Sd = [motion_cross(nu_p, s) for s in S]
            nu[i] = list(nu_p)
            al[i] = list(al_p)
            for s, sd, x, y in zip(S, Sd, qd, qdd):
                nu[i] = vadd(nu[i], [mul(e, x) for e in s])
                al[i] = vadd(al[i], vadd([mul(e, y) for e in s], [mul(e, x) for e in sd]))
            self.Sd[i] = Sd
            self.Sdd[i] = [vadd(motion_cross(al_p, s), motion_cross(nu_p, sd)) for s, sd in zip(S, Sd)]
            self.Tv[i] = ([motion_cross(nu[i], s) for s in S] if tree.is_free(i)
                          else [[mul(2.0, e) for e in sd] for sd in Sd])
        self.nu, self.al = nu, al
        passes.done("derivatives, forward: placements, S_j, ν, α, Ṡ_j, S̈_j", self.E, self.p, self.S, nu, al,
                    self.Sd, self.Sdd)
        self._backward(f_ext or {})

    def _backward(self, f_ext):
        """Composites in the tree's frame, leaves first: I^c, F (forces minus f_ext), and B^c's
        parts (symmetric part of B̄, σ^c, ρ^c)."""
        tree, E, p = self.tree, self.E, self.p
        n = tree.n
        Ic, F, sym, sig, rho = [None] * n, [None] * n, [None] * n, [None] * n, [None] * n
        for i in range(n):
            I = inertia_in_frame(tree.robot.bodies[i], tree.T[i].o, E[i], p[i])
            w, v = self.nu[i][:3], self.nu[i][3:]
            hv = I.times(self.nu[i])                                     # [σ; ρ]
            f = vadd(I.times(self.al[i]), force_cross(self.nu[i], hv))
            if i in f_ext:
                f = vsub(f, transform_force_out(E[i], p[i], f_ext[i]))
            A = [cross(w, [I.I[r][col] for r in range(3)]) for col in range(3)]     # column col of ω× Ī
            S = [[None] * 3 for _ in range(3)]
            for a_ in range(3):
                for b in range(a_, 3):
                    if a_ == b:                           # 2 (A_aa − h_a v_a + v·h)
                        o1, o2 = (a_ + 1) % 3, (a_ + 2) % 3
                        S[a_][a_] = mul(2.0, add(A[a_][a_], add(mul(I.h[o1], v[o1]), mul(I.h[o2], v[o2]))))
                    else:
                        S[a_][b] = S[b][a_] = sub(add(A[b][a_], A[a_][b]), add(mul(I.h[a_], v[b]), mul(v[a_], I.h[b])))
            Ic[i], F[i], sym[i], sig[i], rho[i] = I, f, S, hv[:3], hv[3:]
        for i in reversed(range(n)):
            par = tree.parent[i]
            if par >= 0:
                Ic[par] = Ic[par] + Ic[i]
                F[par] = vadd(F[par], F[i])
                sig[par], rho[par] = vadd(sig[par], sig[i]), vadd(rho[par], rho[i])
                sym[par] = [[add(sym[par][a_][b], sym[i][a_][b]) if b >= a_ else None for b in range(3)]
                            for a_ in range(3)]
                for a_ in range(3):
                    for b in range(a_):
                        sym[par][a_][b] = sym[par][b][a_]
        self.Ic, self.F, self.sym, self.sig, self.rho = Ic, F, sym, sig, rho
        passes.done("derivatives, backward: composites I^c, F, B^c", [I.I for I in Ic], F, sym, sig, rho)

    # -- B^c -------------------------------------------------------------------------------------
    def b_times(self, i, x):
        """B^c_i x (reads x's angular part): [(sym − σ×) x_ω; 2 x_ω × ρ]."""
        xw = x[:3]
        ang = vsub([dot(self.sym[i][a], xw) for a in range(3)], cross(self.sig[i], xw))
        return ang + [mul(2.0, e) for e in cross(xw, self.rho[i])]

    def b_transpose(self, i, s):
        """(B^c_iᵀ s)_ω = (sym + σ×) s_ω + 2 ρ × s_v (its linear part is zero)."""
        sw, sv = s[:3], s[3:]
        return vadd(vadd([dot(self.sym[i][a], sw) for a in range(3)], cross(self.sig[i], sw)),
                    [mul(2.0, e) for e in cross(self.rho[i], sv)])

    # -- the partials --------------------------------------------------------------------------
    def dofs(self, i):
        b = self.tree.robot.bodies[i]
        return list(range(b.v_index, b.v_index + b.joint.nv))

    def ancestors(self, i):
        """Bodies from i up to its root, i included."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.tree.parent[i]
        return out

    def dtau(self, wrt=("q", "v")):
        """{"q": {(k, j): ∂τ_k/∂q_j}, "v": {...}, "M": {(j, k): M_jk, j ≤ k}} over the pairs of
        dofs where they can be nonzero."""
        tree = self.tree
        out = {x: {} for x in wrt}
        out["M"] = {}
        G, H = [None] * tree.n, [None] * tree.n
        for i in range(tree.n):
            if tree.parent[i] < 0:
                continue                                 # no strict ancestor: G, H unused
            Ic, S = self.Ic[i], self.S[i]
            if "q" in wrt:
                G[i] = [vadd(vadd(force_cross(s, self.F[i]), Ic.times(sdd)), self.b_times(i, sd))
                        for s, sd, sdd in zip(S, self.Sd[i], self.Sdd[i])]
            if "v" in wrt:
                H[i] = [vadd(Ic.times(t), self.b_times(i, s)) for s, t in zip(S, self.Tv[i])]
        for i in range(tree.n):
            up = self.ancestors(i)
            for k, s_k in zip(self.dofs(i), self.S[i]):
                y = self.Ic[i].times(s_k)
                z = self.b_transpose(i, s_k)
                for bj in up:                            # b(j) ⪯ b(k)
                    for j, s_j, sd, sdd, t in zip(self.dofs(bj), self.S[bj], self.Sd[bj], self.Sdd[bj], self.Tv[bj]):
                        if j <= k:
                            out["M"][(j, k)] = dot(y, s_j)
                        if "q" in wrt:
                            out["q"][(k, j)] = add(dot(y, sdd), dot(z, sd[:3]))
                        if "v" in wrt:
                            out["v"][(k, j)] = add(dot(y, t), dot(z, s_j[:3]))
            for bk in up[1:]:                            # b(k) ≺ b(j) = i
                for k, s_k in zip(self.dofs(bk), self.S[bk]):
                    for x, j in enumerate(self.dofs(i)):
                        if "q" in wrt:
                            out["q"][(k, j)] = dot(s_k, G[i][x])
                        if "v" in wrt:
                            out["v"][(k, j)] = dot(s_k, H[i][x])
        passes.done("derivatives: ∂τ/∂q, ∂τ/∂v, M", out)
        return out

    def constraint_rows(self, i, K):
        """Rows K (body-i coordinates, SX m x 6) in the tree's frame and w = ν_i ×* K^c per row."""
        rows = [transform_row_out(self.E[i], self.p[i], [K[r, c] for c in range(6)]) for r in range(K.shape[0])]
        return rows, [force_cross(self.nu[i], row) for row in rows]

    def constraint_partials(self, i, K, wrt=("q", "v")):
        """For rows K on body i: ({"q": {(r, j): ∂γ_r/∂q_j}, "v": ..., "J": {(r, j): J_rj}}) over
        the dofs j of i and its ancestors (r indexes K's rows)."""
        rows, ws = self.constraint_rows(i, K)
        out = {x: {} for x in (*wrt, "J")}
        for bj in self.ancestors(i):
            g = self.g[bj]
            for j, s, sd, sdd, t in zip(self.dofs(bj), self.S[bj], self.Sd[bj], self.Sdd[bj], self.Tv[bj]):
                true = vadd(sdd, [0.0] * 3 + cross(g, s[:3])) if "q" in wrt else None   # α_0 = 0
                for r, (row, w) in enumerate(zip(rows, ws)):
                    out["J"][(r, j)] = dot(row, s)
                    if "q" in wrt:
                        out["q"][(r, j)] = add(dot(row, true), dot(w, sd))
                    if "v" in wrt:
                        out["v"][(r, j)] = add(dot(row, t), dot(w, s))
        return out
