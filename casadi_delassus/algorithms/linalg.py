"""Factorizations over SX scalars, written out so that structural zeros are skipped and
every reciprocal is computed once (never ``casadi.inv`` or a generic ``solve``)."""
from __future__ import annotations

import casadi as ca


def _is_zero(e):
    return isinstance(e, (int, float)) and e == 0 or isinstance(e, ca.SX) and e.is_zero()


def _dot(pairs):
    """Σ a b over the pairs whose factors are not structurally zero (0 if none)."""
    acc = 0
    for a, b in pairs:
        if not (_is_zero(a) or _is_zero(b)):
            acc = a * b if _is_zero(acc) else acc + a * b
    return acc


def ldl(upper, n):
    """Dense LDLᵀ of a symmetric matrix given by its upper entries {(i, j): e}, i <= j.
    Returns (L as {(i, j): e} strictly below the diagonal, D, D⁻¹) in natural order."""
    L, D, Dinv = {}, [], []
    for j in range(n):
        # W[k] = L[j, k] D[k], reused for column j
        W = [L.get((j, k), 0) * D[k] if not _is_zero(L.get((j, k), 0)) else 0 for k in range(j)]
        d = upper.get((j, j), 0) - _dot((W[k], L.get((j, k), 0)) for k in range(j))
        D.append(d)
        Dinv.append(1 / d)
        for i in range(j + 1, n):
            a = upper.get((j, i), 0) - _dot((W[k], L.get((i, k), 0)) for k in range(j))
            if not _is_zero(a):
                L[(i, j)] = a * Dinv[j]
    return L, D, Dinv


def forward_substitute(L, n, B):
    """Solve L Z = B for unit lower-triangular L ({(i, j): e}); B is a list of n rows,
    each a list of columns."""
    Z = []
    for i in range(n):
        Z.append([B[i][c] - _dot((L.get((i, k), 0), Z[k][c]) for k in range(i)) for c in range(len(B[i]))])
    return Z


def scaled_gram(Z, Dinv, m):
    """Upper entries of Zᵀ D⁻¹ Z for Z (n rows x m columns)."""
    scaled = [[z * d if not _is_zero(z) else 0 for z in row] for row, d in zip(Z, Dinv)]
    return {(a, b): _dot((scaled[k][a], Z[k][b]) for k in range(len(Z)))
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
