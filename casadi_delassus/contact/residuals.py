"""The three quantities a frictional-contact solve stops on, evaluated on an answer (λ, σ):
primal feasibility (λ ∈ K_μ), dual feasibility (σ + Γ(σ) ∈ K_μ*) and complementarity
(λ ⊥ σ + Γ(σ)), as Carpentier et al. 2024 (RSS, Sec. on stopping criteria) and Pinocchio 4's
ADMM and PGS report them; the relaxed problem takes Γ = 0.  All are absolute maxima over the
contacts, in the units of λ (N·s) times those of σ for the complementarity.

Dual feasibility also counts a contact's approach speed −σ_n (every solution of either problem has σ_n ≥ 0).  The
distance to K_μ* alone does not see it under a large μ: at λ = 0 with σ = (σ_t, −v), Γ lifts σ_n by μ‖σ_t‖ and the
distance of σ + Γ(σ) to the narrow cone K_μ* is about v/μ, so a foot sinking at 0.25 m/s passed tol 1e-4 with
μ = 1e4 (issue 31)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cones import blocks, cone_distance, de_saxce, dual_cone_distance


@dataclass(frozen=True)
class Residuals:
    """Absolute NCP residuals of one answer."""
    primal: float           # max_i dist(λ_i, K_μi)
    dual: float             # max_i max(dist(σ_i + Γ_i, K_μi*), −σ_n,i)
    complementarity: float  # max_i |λ_iᵀ (σ_i + Γ_i)|

    def max(self):
        """The largest of the three (what a tolerance is compared with)."""
        return max(self.primal, self.dual, self.complementarity)


def corrected_velocity(sigma, mu, exact=True):
    """σ + Γ(σ) for the exact problem, σ for the relaxation."""
    return sigma + de_saxce(sigma, mu) if exact else np.asarray(sigma, dtype=float)


def residuals(lam, sigma, mu, exact=True):
    """Residuals of (λ, σ) for friction μ (per contact)."""
    z = corrected_velocity(sigma, mu, exact)
    comp = np.abs(np.sum(blocks(lam) * blocks(z), axis=1))
    dual = np.maximum(dual_cone_distance(z, mu), -blocks(sigma)[:, 2])
    return Residuals(float(np.max(cone_distance(lam, mu), initial=0.0)),
                     float(np.max(dual, initial=0.0)),
                     float(np.max(comp, initial=0.0)))
