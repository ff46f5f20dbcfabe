"""The early elimination of a constraint row at a 1-DoF joint (PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Sec. VIII, eqs. 60-64; derived in
dynamics/pv_early.py's docstring): the Householder reflection Q with Q k̃ = −cs e_1, the
eliminated row's K̃, l̃ and Σ⁻¹ in the backward sweep (``eliminate``), and the multipliers
λ_i^A = Q [μ̃; μ̂] rebuilt in the roll-out (``rebuild``).  Shared by PV's driver
(dynamics/pv.py), which eliminates where a policy says so: pv where the pivot provably never
vanishes, pv_early at every joint."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..symbolic.scalar import add, dot, is_zero, mat_vec, mul, sub

EPS = 1e-300          # keeps 1/(‖k‖(‖k‖ + |k₁|)) finite when k = 0 exactly (then w = 0)


class Elimination:
    """What the roll-out needs at a joint that eliminated a row: K̃, l̃, Σ⁻¹, Q (applied by
    ``reflect``) and cs with (Q k̃)_1 = −cs; and ‖k̃‖² (a number where k̃ is constant)."""

    def __init__(self, Kt, lt, sig, Q, cs, nrm2):
        self.Kt, self.lt, self.sig, self.Q, self.cs, self.nrm2 = Kt, lt, sig, Q, cs, nrm2


def householder(kt):
    """Q as (w, β = 2 / wᵀw) and cs = copysign(‖k̃‖, k̃_1) (sign(0) = +1), ‖k̃‖²; Q k̃ = −cs e_1."""
    nrm2 = dot(kt, kt)
    nrm = ca.sqrt(nrm2)
    cs = ca.copysign(nrm, kt[0]) if not is_zero(kt[0]) else nrm
    w = [add(kt[0], cs)] + list(kt[1:])
    beta = 1 / (nrm * (nrm + (ca.fabs(kt[0]) if not is_zero(kt[0]) else 0.0)) + EPS)   # wᵀw = 2‖k‖(‖k‖ + |k₁|)
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
        return [mat_vec(Q, x) for x in cols]
    w, beta = Q
    out = []
    for x in cols:
        bt = mul(beta, dot(w, x))
        out.append([sub(xi, mul(wi, bt)) for xi, wi in zip(x, w)])
    return out


def is_numeric(x):
    return not isinstance(x, ca.SX) or x.is_constant()


def eliminate(kt, K, l0, gb, t, a, D):
    """Eqs. (60)-(63) at one 1-DoF joint: (Elimination, K̂, l̂, H^a update (upper entries), Σ⁻¹ l̃).

    K are the rows K_i^A that reach the joint (not yet projected), l0 = l_i + K_i^A a_b,i, and
    (with k_i = ±k̃ for S_i = ±e_a, else k̃ = k_i = K_i^A S_i) the projection is K_i^A P_iᵀ =
    K − k̃ gbᵀ and the shifted l is l0 + k̃ t (eq. 42d; gb = Ū_i without the sign of S_i,
    t = ±D_i⁻¹ u_i − gbᵀ a_b,i, passed as (t, sign) below).  Since Q k̃ = −cs e_1, Q K P_iᵀ =
    Q K + cs e_1 gbᵀ and Q (l0 + k̃ t) = Q l0 − cs t e_1: only the eliminated first row needs the
    projection; the rows passed on are rows 2.. of Q K (their component along S_i is exactly 0)."""
    m = len(kt)
    if all(is_numeric(x) for x in kt):
        Q, cs = numeric_reflection(np.array([float(x) for x in kt]))
        nrm2 = cs * cs
        sig = mul(D, 1.0 / nrm2)
    elif m == 1:                                     # Q = 1: Σ⁻¹ = D / k², (Q k)_1 = k
        Q, cs, nrm2 = np.eye(1), -kt[0], mul(kt[0], kt[0])
        sig = ca.if_else(nrm2 > 0, D / nrm2, 0)
    else:
        Q, cs, nrm2 = householder(kt)
        sig = ca.if_else(nrm2 > 0, D / nrm2, 0)      # Σ⁻¹ = D / ‖k‖² (0 if k = 0 exactly)
    cols = {col: [row[col] for row in K] for col in range(6) if col != a}
    QK = dict(zip(cols, reflect(Q, list(cols.values()))))
    Ql = reflect(Q, [l0])[0]
    Kt = [0.0 if col == a else add(QK[col][0], mul(cs, gb[col])) for col in range(6)]
    tv, tsign = t
    lt = (sub if tsign > 0 else add)(Ql[0], mul(cs, tv))
    sK = [mul(sig, x) for x in Kt]
    more = {(x, y): mul(sK[x], Kt[y]) for x in range(6) for y in range(x, 6)}
    up = [[0.0 if col == a else QK[col][r] for col in range(6)] for r in range(1, m)]
    return Elimination(Kt, lt, sig, Q, cs, nrm2), up, Ql[1:], more, mul(sig, lt)


def rebuild(e, y, mu_hat):
    """Eqs. (62) and (64) in the roll-out at a joint that eliminated: μ̃ = Σ⁻¹ (K̃ y + l̃) with
    y = ^iX_λ a_λ, λ_i^A = Q [μ̃; μ̂]; returns (λ_i^A, cs μ̃), where k_iᵀ λ_i^A = ∓ cs μ̃."""
    mu1 = mul(e.sig, add(dot(e.Kt, y), e.lt))
    return reflect(e.Q, [[mu1] + mu_hat])[0], mul(e.cs, mu1)
