"""Linear algebra over SX scalars (lists of scalars, dicts of upper entries), written out so
that structural zeros are skipped and every reciprocal is computed once (never
``casadi.inv`` or a generic ``solve``).  CasADi folds 0*x and x+0, so exact numeric zeros
cost nothing; these helpers also avoid building them."""
from __future__ import annotations

import casadi as ca

from .scalar import dot, is_zero


def entries(M):
    """A (dense) SX matrix as a list of rows of scalars; lists pass through."""
    if isinstance(M, ca.SX):
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


def ldl_solve(L, Dinv, b):
    """x with L D Lᵀ x = b for the factors of ``ldl``; b a list of n scalars."""
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
    """Upper entries of A⁻¹ for symmetric positive-definite A = L D Lᵀ:
    A⁻¹ = L⁻ᵀ D⁻¹ L⁻¹ = Wᵀ D⁻¹ W with W = L⁻¹."""
    L, _, Dinv = ldl(upper, n)
    W = forward_substitute(L, n, [[1 if i == c else 0 for c in range(n)] for i in range(n)])
    return scaled_gram(W, Dinv, n)


def upper_entries(M):
    """{(i, j): M[i, j]} for i <= j of a square SX."""
    n = M.shape[0]
    return {(i, j): M[i, j] for i in range(n) for j in range(i, n)}
