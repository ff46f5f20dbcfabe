"""Projected Gauss–Seidel on the frictional contact problem, NumPy reference (the compiled
loop in codegen/templates/contact_step.c.j2 runs the same sweep).

Per-contact block Gauss–Seidel on G's 3×3 diagonal blocks (Carpentier et al. 2024, RSS, the
PGS baseline it compares ADMM with, and Pinocchio 4's PGSConstraintSolver; Jean and Moreau's
non-smooth contact dynamics): each sweep visits the contacts in order with the latest λ,
σ_i = g_i + Σ_j G_ij λ_j, and with over-relaxation ω ∈ (0, 2):

- exact Coulomb problem: the normal impulse first, λ_n ← max(0, λ_n − ω σ_n / G_nn), then the
  friction impulse on the disk of radius μ λ_n, λ_t ← Π_disk(λ_t − ω σ_t / ℓ_t) with ℓ_t the
  largest eigenvalue of the 2×2 tangential block (a scalar step keeps the fixed point the
  maximal-dissipation law: λ_t opposes σ_t when sliding);
- convex relaxation: λ_i ← Π_K(λ_i − ω σ_i / tr G_ii) (the trace bounds the block's largest
  eigenvalue).

The sweep stops when the answer's three residuals (residuals.py) and the sweep's largest change
of σ are ≤ tol (after zero\nsweeps when the warm start λ₀ already solves it).
"""
from __future__ import annotations

import numpy as np

from .cones import project_cone, project_disk
from .result import Options, finish


def tangent_step(Gii):
    """ℓ_t: the largest eigenvalue of the 2×2 tangential block of G_ii."""
    a, b, c = Gii[0, 0], Gii[0, 1], Gii[1, 1]
    return 0.5 * (a + c) + np.hypot(0.5 * (a - c), b)


def sweep(G, g, mu, lam, exact, omega):
    """One Gauss–Seidel pass over the contacts, updating ``lam`` in place."""
    for i in range(len(g) // 3):
        r = slice(3 * i, 3 * i + 3)
        Gii = G[r, r]
        sigma = g[r] + G[r] @ lam
        if exact:
            new_n = max(0.0, lam[r][2] - omega * sigma[2] / Gii[2, 2])
            sigma_t = sigma[:2] + Gii[:2, 2] * (new_n - lam[r][2])
            t = project_disk((lam[r][:2] - omega * sigma_t / tangent_step(Gii))[None], mu[i] * new_n)[0]
            lam[r] = (t[0], t[1], new_n)
        else:
            lam[r] = project_cone(lam[r] - omega * sigma / np.trace(Gii), mu[i:i + 1])


def solve(G, g, mu, exact=True, lam0=None, options=Options()):
    """PGS solve of the contact problem (G, g, μ); ``lam0`` warm-starts λ.  Returns a Result."""
    G, g = np.asarray(G, dtype=float), np.asarray(g, dtype=float)
    mu = np.asarray(mu, dtype=float)
    lam = project_cone(np.zeros(len(g)) if lam0 is None else np.asarray(lam0, dtype=float), mu)
    sigma = G @ lam + g
    for k in range(options.max_iter + 1):
        before = sigma
        if k:
            sweep(G, g, mu, lam, exact, options.omega)
        sigma = G @ lam + g
        done = finish(lam.copy(), sigma, mu, exact, k, options, last=k == options.max_iter,
                      step=np.max(np.abs(sigma - before)))
        if done is not None:
            return done
