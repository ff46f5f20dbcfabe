"""What a contact solve returns and is told: options, statuses, the one stopping test the
NumPy solvers and the compiled loop (templates/step.c.j2) share, and what a step returns, whichever
made it (the compiled step, the NumPy reference step, the time-stepping loop's free step)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .residuals import Residuals, residuals

CONVERGED, MAX_ITERATIONS, NOT_FINITE = 0, 1, 2
STATUS = {CONVERGED: "converged", MAX_ITERATIONS: "max iterations", NOT_FINITE: "NaN"}


@dataclass(frozen=True)
class Options:
    """Solver settings: stop when every residual ≤ tol; ρ ≤ 0 picks ADMM's initial ρ
    (admm.initial_rho); η is ADMM's proximal weight; ω PGS's over-relaxation."""
    tol: float = 1e-10
    max_iter: int = 1000
    rho: float = 0.0
    eta: float = 1e-8
    omega: float = 1.0


@dataclass(frozen=True)
class Result:
    """λ (impulses, N·s), σ = Gλ + g (contact velocities), iterations, residuals and a status."""
    lam: np.ndarray
    sigma: np.ndarray
    iterations: int
    residuals: Residuals
    status: str

    @property
    def converged(self):
        """Whether the solve met its tolerance."""
        return self.status == STATUS[CONVERGED]


@dataclass(frozen=True)
class StepResult:
    """One step (or N, batch first): λ and σ = Gλ + g in the contact frames [t₁, t₂, n] (N·s, m/s),
    v_next, the solver's iterations, residuals and status."""
    lam: np.ndarray
    sigma: np.ndarray
    v_next: np.ndarray
    iterations: int | np.ndarray
    residuals: Residuals | np.ndarray | float
    status: str | list

    @property
    def converged(self):
        """Whether the solve (every solve of a batch) met its tolerance."""
        return np.all(np.asarray(self.status) == STATUS[CONVERGED])

    @property
    def residual(self):
        """The largest residual (what the time-stepping loop records)."""
        r = self.residuals
        return float(r.max()) if isinstance(r, Residuals) else float(np.max(r, initial=0.0))


def finish(lam, sigma, mu, exact, k, options, last=False, step=0.0):
    """The Result at iteration k if it is final (converged, not finite, or ``last``), else None.
    Converged: the three residuals and ``step``, the iteration's largest change of σ = Gλ + g,
    all ≤ tol (the residuals alone let λ stop far from the solution where λ or σ is small:
    complementarity is a product; σ, unlike λ, is unique where G is singular)."""
    if not (np.all(np.isfinite(lam)) and np.all(np.isfinite(sigma))):
        return Result(lam, sigma, k, Residuals(np.nan, np.nan, np.nan), STATUS[NOT_FINITE])
    r = residuals(lam, sigma, mu, exact)
    if r.max() <= options.tol and step <= options.tol:
        return Result(lam, sigma, k, r, STATUS[CONVERGED])
    return Result(lam, sigma, k, r, STATUS[MAX_ITERATIONS]) if last else None
