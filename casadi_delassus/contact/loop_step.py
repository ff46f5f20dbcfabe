"""What the time-stepping loop (simulate.py) reads from one step, whichever step made it: the
compiled contact step or the NumPy reference (reference_step.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepResult:
    """What the loop reads from a step: v⁺, impulses λ (3 per active contact, [t₁, t₂, n]),
    iterations, the largest residual and the solver's status ("converged" when solved)."""
    v_next: np.ndarray
    lam: np.ndarray
    iterations: int = 0
    residual: float = 0.0
    status: str = "converged"


def largest_residual(residuals):
    """The largest of a step's residuals (a Residuals object, an array or a number)."""
    if hasattr(residuals, "max"):
        return float(residuals.max())
    return float(np.max(np.asarray(residuals, dtype=float))) if np.size(residuals) else 0.0
