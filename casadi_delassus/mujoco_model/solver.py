"""A NumPy reference solve of MuJoCo's constraint problem over every row type (MuJoCo's
computation chapter, "Constraint model" and "Solver"; Todorov 2014, "Convex and
analytically-invertible dynamics with contacts and constraints", ICRA).  The primal problem

    qacc = argmin_a  ½ (a − a₀)ᵀ M (a − a₀) + s(J a − a_ref)

(a₀ = qacc_smooth) has one minimizer (M > 0), and efc_force = −∂s/∂(J a − a_ref) there, so a
converged solve equals MuJoCo's answer whichever of its solvers ran.  s sums, per row r = J a − a_ref:

- equality:                    ½ D r²;
- friction loss (f ∈ [−fl, fl]): ½ D r² for |r| < R fl, else fl |r| − ½ R fl²;
- limits, frictionless contacts, pyramid edges (f ≥ 0): ½ D r² for r < 0, else 0;
- an elliptic contact (rows n, t₁ … of condim d), with U₀ = μ r₀, Uⱼ = μⱼ rⱼ, N = U₀, T = ‖U₁…‖
  (μ = μ₁ √(R₁/R₀), MuJoCo's contact.mu): 0 where N ≥ μ T, ½ Σ D r² where μ N + T ≤ 0, and
  ½ D₀/(μ²(1 + μ²)) (N − μ T)² between (the cone's surface).

Solved by Newton's method on a (the Hessian M + Jᵀ ∂²s J, the cone blocks included) with an
exact line search (the cost is convex and piecewise smooth along a line: bisection with secant
steps on its derivative), to a gradient below ``tol`` relative to the forces at play; the
result says whether it converged."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constraints import ELLIPTIC, EQUALITY, FRICTION_DOF

STATUS = ("converged", "max iterations", "not finite")
# the relative gradient accepted once Newton steps no longer move qacc (``solve``)
STALLED = 1e-8


@dataclass
class Problem:
    """MuJoCo's constraint problem of one state: M, qacc_smooth and the active rows (NumPy), and
    the elliptic cones as (first row, condim, μ, friction (condim − 1))."""
    M: np.ndarray
    qacc_smooth: np.ndarray
    J: np.ndarray
    aref: np.ndarray
    R: np.ndarray
    type: np.ndarray
    frictionloss: np.ndarray
    cones: list

    @classmethod
    def of(cls, M, qacc_smooth, efc, friction=()):
        """From an EfcFunction's rows ``efc`` (constraints.py) and each elliptic contact's
        friction (5 numbers, in the order of the contacts, by ``efc["id"]``)."""
        cones, t, i = [], efc["type"], 0
        while i < len(t):
            if t[i] == ELLIPTIC:
                k = i
                while k < len(t) and t[k] == ELLIPTIC and efc["id"][k] == efc["id"][i]:
                    k += 1
                fr = np.asarray(friction[efc["id"][i]], float)
                mu = fr[0] * np.sqrt(efc["R"][i + 1] / efc["R"][i]) if k - i > 1 else fr[0]
                cones.append((i, k - i, mu, fr[:k - i - 1]))
                i = k
            else:
                i += 1
        return cls(np.asarray(M, float), np.asarray(qacc_smooth, float), np.asarray(efc["J"], float).reshape(-1, len(qacc_smooth)),
                   np.asarray(efc["aref"], float), np.asarray(efc["R"], float), np.asarray(t, int),
                   np.asarray(efc["frictionloss"], float), cones)


@dataclass
class Solution:
    qacc: np.ndarray
    force: np.ndarray
    iterations: int
    gradient: float
    status: str


def _cone_zone(r, mu, fr):
    """(zone, N, T, U) of an elliptic cone's rows r: 0 top (no force), 1 bottom (quadratic), 2 surface."""
    U = np.concatenate([[mu * r[0]], fr * r[1:]])
    N, T = U[0], np.linalg.norm(U[1:])
    if N >= mu * T or (T <= 0 and N >= 0):
        return 0, N, T, U
    if mu * N + T <= 0 or (T <= 0 and N < 0):
        return 1, N, T, U
    return 2, N, T, U


def evaluate(p, a, hessian=False):
    """(cost, force, constraint Hessian blocks) of the problem at qacc ``a``: the force is
    −∂s/∂r; the Hessian (nefc x nefc, sparse in blocks) when asked."""
    D = 1 / p.R
    r = p.J @ a - p.aref
    da = a - p.qacc_smooth
    cost = 0.5 * da @ p.M @ da
    force = np.zeros_like(r)
    H = np.zeros((len(r), len(r))) if hessian else None
    cone = np.zeros(len(r), bool)
    for i, dim, _, _ in p.cones:
        cone[i:i + dim] = True
    for i in np.flatnonzero(~cone):
        fl = p.frictionloss[i]
        if p.type[i] == FRICTION_DOF and abs(r[i]) >= p.R[i] * fl:
            force[i] = -fl * np.sign(r[i])
            cost += fl * abs(r[i]) - 0.5 * p.R[i] * fl * fl
        elif p.type[i] in (EQUALITY, FRICTION_DOF) or r[i] < 0:
            force[i] = -D[i] * r[i]
            cost += 0.5 * D[i] * r[i] ** 2
            if hessian:
                H[i, i] = D[i]
    for i, dim, mu, fr in p.cones:
        s = slice(i, i + dim)
        zone, N, T, U = _cone_zone(r[s], mu, fr)
        if zone == 1:
            force[s] = -D[s] * r[s]
            cost += 0.5 * D[s] @ r[s] ** 2
            if hessian:
                H[s, s] = np.diag(D[s])
        elif zone == 2:
            Dm = D[i] / (mu * mu * (1 + mu * mu))
            gap = N - mu * T
            cost += 0.5 * Dm * gap * gap
            scale = np.concatenate([[mu], fr])
            gU = np.concatenate([[Dm * gap], -Dm * gap * mu * U[1:] / T])      # ∂s/∂U
            force[s] = -gU * scale
            if hessian:
                HU = np.zeros((dim, dim))
                HU[0, 0] = 1
                HU[0, 1:] = HU[1:, 0] = -mu * U[1:] / T
                HU[1:, 1:] = (mu * mu - mu * N / T) * np.eye(dim - 1) + mu * N / T ** 3 * np.outer(U[1:], U[1:])
                H[s, s] = Dm * HU * np.outer(scale, scale)
    return cost, force, H


def _slope(p, a, d):
    """The cost's derivative along d at a."""
    _, force, _ = evaluate(p, a)
    return (p.M @ (a - p.qacc_smooth) - p.J.T @ force) @ d


def _line_search(p, a, d, tol=1e-15, iterations=200):
    """The step α > 0 minimizing the cost along d (its derivative's root: bracket, then
    bisection with secant steps)."""
    g0 = _slope(p, a, d)
    if g0 >= 0:
        return 0.0
    lo, glo, hi = 0.0, g0, 1.0
    ghi = _slope(p, a + hi * d, d)
    while ghi < 0 and hi < 1e12:
        lo, glo, hi = hi, ghi, hi * 2
        ghi = _slope(p, a + hi * d, d)
    for _ in range(iterations):
        t = lo - glo * (hi - lo) / (ghi - glo) if ghi != glo else 0.5 * (lo + hi)
        if not lo < t < hi or (t - lo) < 0.01 * (hi - lo) or (hi - t) < 0.01 * (hi - lo):
            t = 0.5 * (lo + hi)
        g = _slope(p, a + t * d, d)
        if abs(g) <= tol * abs(g0) or hi - lo <= 1e-16 * max(1.0, hi):
            return t
        if g < 0:
            lo, glo = t, g
        else:
            hi, ghi = t, g
    return 0.5 * (lo + hi)


def solve(p, qacc_warm=None, tol=1e-13, max_iter=100):
    """MuJoCo's qacc and efc_force for problem ``p`` (a Solution), from ``qacc_warm``
    (default qacc_smooth): Newton steps until the gradient M (a − a₀) − Jᵀ f is below ``tol``
    times the size of the forces in it, or, below 1e-8 of them, the steps stop moving a (rounding
    then bounds the gradient: stiff soft rows, D = 1/R up to 1e10, amplify a's last bits)."""
    a = np.array(p.qacc_smooth if qacc_warm is None else qacc_warm, float)
    scale = np.abs(p.M @ p.qacc_smooth).max() + 1e-300
    g_norm, k = np.inf, 0
    for k in range(1, max_iter + 1):
        _, force, H = evaluate(p, a, hessian=True)
        g = p.M @ (a - p.qacc_smooth) - p.J.T @ force
        g_norm = np.abs(g).max() / max(scale, np.abs(p.J.T @ force).max())
        if not np.all(np.isfinite(g)):
            return Solution(a, force, k, g_norm, STATUS[2])
        if g_norm <= tol:
            return Solution(a, force, k, g_norm, STATUS[0])
        step = -np.linalg.solve(p.M + p.J.T @ H @ p.J, g)
        move = _line_search(p, a, step) * step
        a = a + move
        if np.abs(move).max() <= 4e-16 * max(1.0, np.abs(a).max()) and g_norm <= STALLED:
            return Solution(a, evaluate(p, a)[1], k, g_norm, STATUS[0])
    force = evaluate(p, a)[1]
    return Solution(a, force, k, g_norm, STATUS[1])
