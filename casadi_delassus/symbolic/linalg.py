"""Linear algebra over SX scalars (lists of scalars, dicts of upper entries), written out so
that structural zeros are skipped and every reciprocal is computed once (never
``casadi.inv`` or a generic ``solve``).  CasADi folds 0*x and x+0, so exact numeric zeros
cost nothing; these helpers also avoid building them."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..errors import ConstraintError
from .scalar import add, dot, is_zero, mul, neg, sub


def entries(M):
    """A (dense) SX or numpy matrix as a list of rows of scalars; lists pass through."""
    if isinstance(M, (ca.SX, np.ndarray)):
        return [[M[a, b] for b in range(M.shape[1])] for a in range(M.shape[0])]
    return M


def to_sx_rows(rows):
    """An SX matrix from a list of rows of scalars (SX or numbers)."""
    return ca.vertcat(*[ca.horzcat(*[e if isinstance(e, ca.SX) else ca.SX(e) for e in row]) for row in rows])


def sym(n, entry):
    """n x n symmetric list-matrix from entry(a, b), evaluated for a <= b only."""
    M = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a, n):
            M[a][b] = M[b][a] = entry(a, b)
    return M


def kind(e):
    """0: exact zero, 1: numeric constant, 2: symbolic."""
    if is_zero(e):
        return 0
    return 1 if not isinstance(e, ca.SX) or e.is_constant() else 2


def gram_cost(A, B, upper=True):
    """Operations to form the entries of A Bᵀ (rows of A against rows of B; the upper ones
    only when ``upper``), zeros skipped: a product costs one multiplication unless both
    factors are numbers.  Used to pick the cheaper of two equal formulas."""
    ka, kb = [[kind(e) for e in row] for row in A], [[kind(e) for e in row] for row in B]
    cost = 0
    for r in range(len(A)):
        for s in range(r if upper else 0, len(B)):
            pairs = [x * y for x, y in zip(ka[r], kb[s]) if x and y]
            n_sym = sum(p > 1 for p in pairs)
            terms = n_sym + (len(pairs) > n_sym)
            cost += n_sym + max(0, terms - 1)
    return cost


class Shared:
    """Hash-consed products and differences: an operation on the same operands is built
    once, so equal quantities reached twice are not recomputed even without CasADi's cse."""

    def __init__(self):
        self.cache = {}

    @staticmethod
    def _key(x):
        if not isinstance(x, ca.SX):
            return float(x)
        return float(x) if x.is_constant() else x.element_hash()

    def _get(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def mul(self, x, y):
        a, b = sorted((self._key(x), self._key(y)), key=repr)
        return self._get(("*", a, b), lambda: x * y)

    def sub(self, x, y):
        return self._get(("-", self._key(x), self._key(y)), lambda: x - y)

    def add(self, x, y):
        a, b = sorted((self._key(x), self._key(y)), key=repr)
        return self._get(("+", a, b), lambda: x + y)

    def dot(self, a, b):
        acc = 0
        for x, y in zip(a, b):
            if not (is_zero(x) or is_zero(y)):
                p = self.mul(x, y)
                acc = p if is_zero(acc) else self._get(("+", self._key(acc), self._key(p)), lambda: acc + p)
        return acc


def ldl(upper, n):
    """Dense LDLᵀ of a symmetric matrix given by its upper entries {(i, j): e}, i <= j.
    Returns (L as {(i, j): e} strictly below the diagonal, D, D⁻¹) in natural order.
    The entries of L D (L before its scaling by D⁻¹) are kept, not recomputed as L·D."""
    L, LD, D, Dinv = {}, {}, [], []
    for j in range(n):
        W = [LD.get((j, k), 0) for k in range(j)]              # L[j, k] D[k]
        d = upper.get((j, j), 0) - dot(W, [L.get((j, k), 0) for k in range(j)])
        if isinstance(d, (int, float)) and d == 0:      # else a ZeroDivisionError from deep inside a solver
            raise ConstraintError(f"a pivot of an LDLᵀ is exactly zero (row {j} of {n}): the matrix is singular at "
                                  f"every configuration, e.g. constraint rows that no joint can move (redundant)")
        D.append(d)
        Dinv.append(1 / d)
        for i in range(j + 1, n):
            a = upper.get((j, i), 0) - dot(W, [L.get((i, k), 0) for k in range(j)])
            if not is_zero(a):
                LD[(i, j)], L[(i, j)] = a, a * Dinv[j]
    return L, D, Dinv


def forward_substitute(L, n, B):
    """Solve L Z = B for unit lower-triangular L ({(i, j): e}); B is a list of n rows,
    each a list of columns."""
    Z = []
    for i in range(n):
        Z.append([B[i][c] - dot([L.get((i, k), 0) for k in range(i)], [Z[k][c] for k in range(i)])
                  for c in range(len(B[i]))])
    return Z


def back_substitute(L, n, y):
    """Solve Lᵀ x = y for unit lower-triangular L ({(i, j): e}); y a list of n scalars."""
    x = [None] * n
    for i in reversed(range(n)):
        x[i] = y[i] - dot([L.get((k, i), 0) for k in range(i + 1, n)], x[i + 1:])
    return x


def ldl_solve(fac, b):
    """x with L D Lᵀ x = b for the factors (L, D, D⁻¹) of ``ldl``; b a list of n scalars."""
    L, _, Dinv = fac
    n = len(b)
    z = forward_substitute(L, n, [[e] for e in b])
    return back_substitute(L, n, [z[i][0] * Dinv[i] for i in range(n)])


def scaled_gram(Z, Dinv, m):
    """Upper entries of Zᵀ D⁻¹ Z for Z (n rows x m columns)."""
    scaled = [[z * d if not is_zero(z) else 0 for z in row] for row, d in zip(Z, Dinv)]
    return {(a, b): dot([row[a] for row in scaled], [row[b] for row in Z])
            for a in range(m) for b in range(a, m)}


def to_sx(upper, n):
    """Symmetric SX from upper entries."""
    M = ca.SX.zeros(n, n)
    for (i, j), e in upper.items():
        M[i, j] = e
        M[j, i] = e
    return M


def spd_inverse(upper, n):
    """Upper entries of A⁻¹ for symmetric positive-definite A (``ldl_inverse`` of its ``ldl``)."""
    L, _, Dinv = ldl(upper, n)
    return ldl_inverse(L, Dinv, n)


def ldl_inverse(L, Dinv, n):
    """Upper entries of A⁻¹ = L⁻ᵀ D⁻¹ L⁻¹ = Wᵀ D⁻¹ W, W = L⁻¹, from the factors of ``ldl``.
    A caller that also outputs the factors passes the same ones: a second ``ldl`` of A builds
    equal but distinct expressions, which cse merges in the value but a reverse sweep taken
    before cse goes through twice."""
    W = forward_substitute(L, n, [[1 if i == c else 0 for c in range(n)] for i in range(n)])
    return scaled_gram(W, Dinv, n)


def upper_entries(M):
    """{(i, j): M[i, j]} for i <= j of a square SX."""
    n = M.shape[0]
    return {(i, j): M[i, j] for i in range(n) for j in range(i, n)}


# -- block elimination of a saddle point (the hard dynamics solvers' base solve) --------------------
def blocks_of(upper, rows):
    """Connected components of the pattern of a symmetric matrix over ``rows`` (upper entries
    keyed by row ids): the independent diagonal blocks, each a list of rows in ``rows``' order."""
    parent = {r: r for r in rows}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for (a, b), e in upper.items():
        if a in parent and b in parent and not is_zero(e):
            parent[find(a)] = find(b)
    comps = {}
    for r in rows:
        comps.setdefault(find(r), []).append(r)
    return list(comps.values())


def local(upper, block):
    """The entries of ``upper`` (keyed by row ids) inside ``block``, keyed by positions."""
    idx = {r: j for j, r in enumerate(block)}
    return {(min(idx[a], idx[b]), max(idx[a], idx[b])): e for (a, b), e in upper.items()
            if a in idx and b in idx}


def block_plus_low_rank_solve(L, blocks, V, g, h0, l):
    """λ = (L + V G₀ Vᵀ)⁻¹ (l − V h0) and s = Vᵀ λ, for L block-diagonal and positive
    semi-definite (upper entries keyed by row ids, ``blocks`` its diagonal blocks, in the order
    they are eliminated), V {row: 6-list}, G₀ = diag(g) positive definite, h0 a 6-list.

    Block Gaussian elimination in the "generator" form: after blocks 1..j−1 the remaining
    matrix is still L + V G_{j−1} Vᵀ on the remaining rows, with the 6x6
        G_j = G_{j−1} − G_{j−1} V_jᵀ B_j⁻¹ V_j G_{j−1},   B_j = L_j + V_j G_{j−1} V_jᵀ,
    so only the b_j x b_j pivot blocks B_j are factorized (LDLᵀ, B_j = P Δ Pᵀ).  Each B_j is a
    diagonal block of a Schur complement of the whole matrix: positive definite whenever the
    whole matrix is, whatever L_j is (L_j singular, e.g. a branch at a kinematic singularity,
    or L_j = 0).  The last block needs no G update; small blocks first keep the dense G
    products (36 per row) off the largest block's factorization."""
    G = {(x, y): (g[x] if x == y else 0.0) for x in range(6) for y in range(x, 6)}
    h = list(h0)
    steps, pivots = [], []
    for n_, blk in enumerate(blocks):
        b = len(blk)
        U = [[dot([G[(min(x, y), max(x, y))] for y in range(6)], V[r]) for x in range(6)] for r in blk]   # V_j G
        B = {(a_, c_): add(L.get((min(blk[a_], blk[c_]), max(blk[a_], blk[c_])), 0.0), dot(V[blk[a_]], U[c_]))
             for a_ in range(b) for c_ in range(a_, b)}
        P, D, dinv = ldl(B, b)
        pivots += D
        w = [row[0] for row in forward_substitute(P, b, [[sub(l[r], dot(V[r], h))] for r in blk])]
        W = None
        if n_ < len(blocks) - 1:                            # G ← G − Wᵀ Δ⁻¹ W,  W = P⁻¹ V_j G
            W = forward_substitute(P, b, U)
            Ws = [[mul(dinv[a_], e) for e in W[a_]] for a_ in range(b)]
            for x in range(6):
                for y in range(x, 6):
                    G[(x, y)] = sub(G[(x, y)], dot([row[x] for row in Ws], [row[y] for row in W]))
            h = [add(h[x], dot([row[x] for row in Ws], w)) for x in range(6)]
        steps.append((blk, P, dinv, w, W))
    s, lam = [0.0] * 6, {}
    for blk, P, dinv, w, W in reversed(steps):          # λ_j = B_j⁻¹ (ρ_j − V_j G_{j−1} Σ_{i>j} V_iᵀ λ_i)
        t = [mul(dinv[a_], sub(w[a_], dot(W[a_], s)) if W is not None else w[a_]) for a_ in range(len(blk))]
        lam.update(zip(blk, back_substitute(P, len(t), t)))
        s = [add(s[x], dot([V[r][x] for r in blk], [lam[r] for r in blk])) for x in range(6)]
    return lam, s, pivots


def saddle_solve(fac, K, L, blocks, p, l):
    """The base's saddle point  [A, Kᵀ; K, −L] [a; λ] = [−p; −l]  (PV paper eqs. (45)-(47)):
    A the 6x6 positive-definite base inertia given by its LDLᵀ factors ``fac`` (P, Δ, Δ⁻¹),
    K {row: 6-list} the rows at the base, L their block-diagonal inverse-OSIM part (one block
    per branch, ``blocks``).  Eliminating a first gives eq. (47), λ = (L + K A⁻¹ Kᵀ)⁻¹ (l − K A⁻¹ p),
    solved by ``block_plus_low_rank_solve`` with V = P⁻¹ Kᵀ, G₀ = Δ⁻¹: never inverts a block
    of L, so it holds wherever Λ⁻¹ = L + K A⁻¹ Kᵀ is positive definite (eq. (49) needs every
    branch block of L invertible: not at a stretched knee).  a = −A⁻¹ (p + Kᵀ λ) comes from
    the same factors and s = P⁻¹ Kᵀ λ.  Returns (a, {row: λ}, the pivots, for checks)."""
    P, _, g = fac
    rows = [r for blk in blocks for r in blk]
    W = forward_substitute(P, 6, [[K[r][x] for r in rows] + [p[x]] for x in range(6)])
    V = {r: [W[x][c] for x in range(6)] for c, r in enumerate(rows)}
    tp = [W[x][len(rows)] for x in range(6)]
    lam, s, pivots = block_plus_low_rank_solve(L, blocks, V, g, [mul(g[x], tp[x]) for x in range(6)], l)
    a = back_substitute(P, 6, [mul(g[x], add(tp[x], s[x])) for x in range(6)])
    return [neg(e) for e in a], lam, pivots
