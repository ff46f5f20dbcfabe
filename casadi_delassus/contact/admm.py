"""ADMM on the frictional contact problem, NumPy reference (the compiled step's loop,
codegen/templates/contact_step.c.j2, runs the same iteration).

Problem (Carpentier et al. 2024, "From compliant to rigid contact simulation: a unified and
efficient approach", RSS, Sec. III-IV, the method of Pinocchio 4's ADMMConstraintSolver; the
PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Sec. X, names these inequality
constraints as the next step after equality-constrained dynamics): with σ = Gλ + g,

    K_μ ∋ λ ⊥ σ + Γ(σ) ∈ K_μ*          (exact, De Saxcé; Γ = 0: the convex relaxation)

For a fixed correction s = Γ(σ) this is the optimality condition of
min ½λᵀGλ + λᵀ(g + s) over λ ∈ K_μ, which ADMM splits as x = y, x free, y ∈ K_μ, z the
multiplier (a velocity, in K_μ* at the solution):

    x⁺ = (G + (ρ + η) I)⁻¹ (η x + ρ y + z − g − s)      proximal term η (G may be singular)
    y⁺ = Π_K(x⁺ − z/ρ)
    z⁺ = z − ρ (x⁺ − y⁺)
    s⁺ = Γ(z⁺)                                            De Saxcé fixed point, re-evaluated

z converges to σ + Γ(σ), whose tangential part is σ_t, so Γ(z) is the correction at the
iteration's own velocity estimate; re-evaluating it at G y + g instead cycled without converging
on some Talos stances (bench/contact_sweep.py).

The linear solve is the damped inverse (G + (ρ+η)I)⁻¹ that the matrix-free paper
../shared/papers/001_a194bdf892a0cc2c.txt gives as its reason to re-evaluate a damped inverse
with new vectors (each iteration) and new damping (each change of ρ).  ρ starts at
√(ℓ_max · ℓ_min) of G's diagonal and follows the residual-balancing rule of OSQP: when the
primal residual ‖x − y‖∞ and the dual one ρ‖y − y_prev‖∞ differ by more than RHO_RATIO, ρ is
multiplied by √(primal / dual) (at most RHO_CLIP either way, and kept within RHO_RANGE of G's
largest diagonal entry: on a singular G a ρ driven towards 0 overflows) and the damped inverse
refactored if ρ changed;
a contact set that sticks drives ρ down by orders of magnitude, which one jump does where a
fixed factor would refactor at every iteration.  The iteration stops
when the answer (λ = y, σ = Gy + g) has all three residuals (residuals.py) and the last change
of σ ≤ tol, after
zero iterations when the warm start λ₀ already does.

A solve still running after ANDERSON_AFTER iterations goes on with ρ fixed and Anderson acceleration of the
iteration seen as a fixed-point map w ↦ T(w) on w = (x, y, z/ρ) (type II, the last ANDERSON_MEMORY differences:
Walker and Ni 2011, "Anderson acceleration for fixed-point iterations", SIAM J. Numer. Anal.; safeguarded as Zhang,
O'Donoghue and Boyd 2020, "Globally convergent type-I Anderson acceleration for nonsmooth fixed-point iterations",
SIAM J. Optim., do for ADMM: a mixed point whose residual ‖T(w) − w‖ grew more than ANDERSON_SAFEGUARD times is
dropped for the plain image, and the history cleared and refilled by ANDERSON_MEMORY plain steps).  Plain ADMM crawls where strict complementarity fails: a
toppling G1 (issue 31) rests on a toe edge whose corner sticks exactly at the cone's boundary, and G is singular
along the edge; plain ADMM needed 6,705 iterations there (tests/data/g1_topple.npz; Pinocchio's ADMM 10,064), the
accelerated one 142 (docs/contact.md).  Every answer is a plain image y = Π_K(·), so λ stays in the cone, and the
stopping test is the same.
"""
from __future__ import annotations

import numpy as np

from .cones import de_saxce, project_cone
from .result import Options, finish

RHO_RATIO = 10.0
RHO_CLIP = 1e6      # the most one update multiplies or divides ρ by (as RHO_RANGE: one jump, one refactor)
RHO_STEP = 10.0     # the update when one of the two residuals is exactly 0 (not √'s limit: docs/contact.md, measured)
RHO_RANGE = 1e6     # ρ stays within this factor of G's largest diagonal entry, either way
ANDERSON_AFTER = 100        # plain iterations before the accelerated ones (issue 25's problems take 5 to 60)
ANDERSON_MEMORY = 5         # differences kept
ANDERSON_SAFEGUARD = 2.0    # the growth of ‖T(w) − w‖ at a mixed point that drops it
ANDERSON_REG = 1e-12        # Tikhonov weight of the least squares, relative to the trace of its normal matrix


def initial_rho(G, eta):
    """√(max · min) of G's diagonal (a spectral estimate that costs m), at least η."""
    d = np.diag(G)
    return max(float(np.sqrt(np.max(d) * max(np.min(d), eta))), eta)


def rho_factor(primal, dual):
    """What ρ is multiplied by when the residuals are out of balance."""
    if primal > 0 and dual > 0:
        return min(max(np.sqrt(primal / dual), 1 / RHO_CLIP), RHO_CLIP)
    return RHO_STEP if primal > dual else 1 / RHO_STEP


def solve(G, g, mu, exact=True, lam0=None, options=Options()):
    """ADMM solve of the contact problem (G, g, μ); ``lam0`` warm-starts λ.  Returns a Result."""
    G, g = np.asarray(G, dtype=float), np.asarray(g, dtype=float)
    m, eta = len(g), options.eta
    rho = options.rho if options.rho > 0 else initial_rho(G, eta)
    scale = max(float(np.max(np.diag(G))), eta)
    y = project_cone(np.zeros(m) if lam0 is None else np.asarray(lam0, dtype=float), mu)
    sigma = G @ y + g
    s = de_saxce(sigma, mu) if exact else np.zeros(m)
    x, z = y.copy(), sigma + s
    done = finish(y, sigma, mu, exact, 0, options)     # a warm start that already solves it
    if done is not None:
        return done
    factor = np.linalg.cholesky(G + (rho + eta) * np.eye(m))
    for k in range(1, options.max_iter + 1):
        if k > ANDERSON_AFTER:
            step = admm_map(g, mu, exact, eta, rho, lambda b: damped_solve(factor, b))
            return accelerated(step, G, g, mu, exact, np.concatenate([x, y, z / rho]), sigma, k, options)
        x = damped_solve(factor, eta * x + rho * y + z - g - s)
        y_prev, y = y, project_cone(x - z / rho, mu)
        z = z - rho * (x - y)
        sigma_prev, sigma = sigma, G @ y + g
        s = de_saxce(z, mu) if exact else s
        done = finish(y, sigma, mu, exact, k, options, last=k == options.max_iter,
                      step=np.max(np.abs(sigma - sigma_prev)))
        if done is not None:
            return done
        primal, dual = balance(x, y, y_prev, rho)
        if primal > RHO_RATIO * dual or dual > RHO_RATIO * primal:
            new = min(max(rho * rho_factor(primal, dual), scale / RHO_RANGE), scale * RHO_RANGE)
            if new != rho:      # at the end of its range ρ stays: the factor stands
                rho, factor = new, np.linalg.cholesky(G + (new + eta) * np.eye(m))
    return finish(y, sigma, mu, exact, options.max_iter, options, last=True)      # max_iter = 0


def balance(x, y, y_prev, rho):
    """ADMM's primal residual ‖x − y‖∞ and dual one ρ‖y − y_prev‖∞ (NaN when either vector holds one)."""
    return np.max(np.abs(x - y)), rho * np.max(np.abs(y - y_prev))


def damped_solve(factor, b):
    """(G + (ρ+η) I)⁻¹ b from the Cholesky factor of G + (ρ+η) I."""
    return np.linalg.solve(factor.T, np.linalg.solve(factor, b))


def admm_map(g, mu, exact, eta, rho, damped, project=None):
    """T: one ADMM iteration at fixed ρ as a map of w = (x, y, u = z/ρ) (the loop of ``solve``; ``damped`` applies
    (G + (ρ+η) I)⁻¹); ``project`` the projection onto the cone y lies in (None: K_μ, project_cone; MuJoCo's soft
    cones for mujoco_model/soft_admm.py)."""
    m = len(g)
    project = project or (lambda v: project_cone(v, mu))

    def T(w):
        x, y, u = w[:m], w[m:2 * m], w[2 * m:]
        z = rho * u
        x_new = damped(eta * x + rho * y + z - g - (de_saxce(z, mu) if exact else 0.0))
        y_new = project(x_new - u)
        return np.concatenate([x_new, y_new, u - (x_new - y_new)])
    return T


def anderson_mix(images, residuals, t, f):
    """(the type-II Anderson point t − ΔT γ, True) with γ the regularised least-squares fit of f by the residuals'
    differences ΔF, or (t, False) when there is nothing to fit."""
    if not residuals:
        return t, False
    D = np.array(residuals).T
    H = D.T @ D
    trace = float(np.trace(H))
    if not (np.isfinite(trace) and trace > 0):
        return t, False
    gamma = np.linalg.solve(H + ANDERSON_REG * trace * np.eye(len(residuals)), D.T @ f)
    return t - np.array(images).T @ gamma, True


def accelerated(T, G, g, mu, exact, w, sigma, k, options):
    """Iterations k, k+1, … of the ADMM map T from w = (x, y, z/ρ), Anderson-accelerated (module docstring); the
    answer of each is its plain image's y."""
    m = len(g)
    images, residuals = [], []          # the last ANDERSON_MEMORY differences of T(w) and of T(w) − w
    image = residual = None             # T(w) and T(w) − w at the previous point
    mixed, plain = False, 0             # whether w is a mix; plain steps still to take
    for k in range(k, options.max_iter + 1):
        t = T(w)
        f = t - w
        y = t[m:2 * m]
        sigma_prev, sigma = sigma, G @ y + g
        done = finish(y, sigma, mu, exact, k, options, last=k == options.max_iter,
                      step=np.max(np.abs(sigma - sigma_prev)))
        if done is not None:
            return done
        if mixed and not np.linalg.norm(f) <= ANDERSON_SAFEGUARD * np.linalg.norm(residual):
            # the mix made it worse: the plain image instead, and a history refilled by plain steps
            images, residuals, w, mixed, plain = [], [], image, False, ANDERSON_MEMORY
            continue
        if image is not None:
            images, residuals = (images + [t - image])[-ANDERSON_MEMORY:], (residuals + [f - residual])[-ANDERSON_MEMORY:]
        image, residual = t, f
        if plain:
            w, mixed, plain = t, False, plain - 1
        else:
            w, mixed = anderson_mix(images, residuals, t, f)
