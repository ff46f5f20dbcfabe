"""What a contact solve returns and is told: options (their defaults, and the compiled loops' opts[] layout, from
which the templates' OPT_* enums are rendered), statuses, the one stopping test the NumPy solvers and the compiled
loop (codegen/templates/contact_step.c.j2) share, and what a step returns, whichever made it (the compiled step, the NumPy reference
step, the time-stepping loop's free step)."""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..names import shown
from .residuals import Residuals, residuals

CONVERGED, MAX_ITERATIONS, NOT_FINITE = 0, 1, 2
STATUS = {CONVERGED: "converged", MAX_ITERATIONS: "max iterations", NOT_FINITE: "NaN"}
# the compiled loops' status codes (their C enum ST_*, rendered from this, writes info[]'s status entry)
STATUS_CODES = {"CONVERGED": CONVERGED, "MAX_ITERATIONS": MAX_ITERATIONS, "NOT_FINITE": NOT_FINITE}
# the most iterations a solve may be given: the compiled loops (templates/step.c.j2, mujoco_step.c.j2) count them in
# a C int, whose overflow once ran no iteration and left the status unwritten
MAX_ITER = 2 ** 31 - 1


def real(name, value):
    """``value`` as a float when it is one real number (a Python or NumPy number, or a 0-d array of one; not a bool,
    a string, None or several numbers), else an InputError that names it."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise InputError(f"{name}: expected one real number, got {shown(value)}")
    return float(value)


def iterations(max_iter):
    """``max_iter`` as an int when it is a whole number from 0 to MAX_ITER, else an InputError."""
    x = real("max_iter", max_iter)
    if not (0 <= x <= MAX_ITER and x == int(x)):
        raise InputError(f"max_iter: must be an integer from 0 to {MAX_ITER} (a C int), got {shown(max_iter)}")
    return int(x)


def tolerance(tol):
    """``tol`` as a float when it is finite and > 0, else an InputError."""
    x = real("tol", tol)
    if not (np.isfinite(x) and x > 0):
        raise InputError(f"tol: must be finite and > 0, got {shown(tol)}")
    return x


@dataclass(frozen=True)
class Options:
    """Solver settings, checked when made (an InputError names a bad one): stop when every residual ≤ tol (finite,
    > 0) within max_iter iterations (0 to MAX_ITER); ρ ≤ 0 picks ADMM's initial ρ (admm.initial_rho); η ≥ 0 is
    ADMM's proximal weight; ω ∈ (0, 2) PGS's over-relaxation.  The defaults below are the one definition: every
    entry point's ``tol=Options.tol``, ``max_iter=Options.max_iter``, … names them."""
    tol: float = 1e-10
    max_iter: int = 1000
    rho: float = 0.0
    eta: float = 1e-8
    omega: float = 1.0

    def __post_init__(self):
        rho, eta, omega = (real(n, getattr(self, n)) for n in ("rho", "eta", "omega"))
        if not (np.isfinite(eta) and eta >= 0 and np.isfinite(rho) and 0 < omega < 2):
            raise InputError(f"eta >= 0, finite rho and 0 < omega < 2 required, got {eta!r}, {rho!r}, {omega!r}")
        for name, value in (("tol", tolerance(self.tol)), ("max_iter", iterations(self.max_iter)), ("rho", rho),
                            ("eta", eta), ("omega", omega)):
            object.__setattr__(self, name, value)

    def packed(self, layout, **extra):
        """The compiled loop's opts[] in ``layout``'s order (STEP_OPTIONS, SOFT_OPTIONS): each entry this Options'
        field of that name, or ``extra``'s (what is no solver setting: the solver's code, the cone)."""
        return np.array([float(extra[n] if n in extra else getattr(self, n)) for n in layout])


# The compiled loops' opts[]: the C enums OPT_<NAME> (templates/step.c.j2, used by rollout.c.j2; mujoco_step.c.j2) are
# rendered from these tuples and Options.packed fills the arrays by them, so an option is named in one place.
# The step: the solver's code (0 ADMM, 1 PGS), exact (1: De Saxcé, 0: relaxed), fallback (1: ADMM where PGS does not
# converge, solver "auto") beside Options' fields.
STEP_OPTIONS = ("tol", "max_iter", "solver", "exact", "rho", "eta", "omega", "fallback")
# MuJoCo's soft problem (mujoco_model/soft_admm.py): tol is relative there, pyramidal (1) or elliptic (0) cone
SOFT_OPTIONS = ("tol", "max_iter", "pyramidal", "rho")
# The soft problem's defaults: MuJoCo's own answer (Newton to 1e-15) is met to 1e-6 (tests/mujoco/test_mujoco_step.py)
SOFT_DEFAULTS = Options(tol=1e-12, max_iter=100_000)


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
    def converged(self) -> bool:
        """Whether the solve (every solve of a batch) met its tolerance."""
        return bool(np.all(np.asarray(self.status) == STATUS[CONVERGED]))

    @property
    def residual(self) -> float:
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
