"""MuJoCo's soft contact problem solved by ADMM, NumPy twin of the compiled MuJoCo step's loop
(templates/mujoco_step.c.j2, driven by mujoco_model/soft_step.py).

The problem is MuJoCo's (docs/mujoco_contacts.md; soft_contacts.py has R and a_ref; Todorov 2014, "Convex and
analytically-invertible dynamics with contacts and constraints", ICRA): over each contact's efc rows E (its frame's
rows on the contact point's world velocity, or the pyramid's edges n ± μ_j e_j, soft_contacts.efc_rows), with A = E G Eᵀ
(G = J M⁻¹ Jᵀ of the world rows) and b = E J a₀ − a_ref,

    min_f ½ fᵀ (A + R) f + fᵀ b    over f in MuJoCo's cone,

solved in the scaled forces g = f / S (S = μ_j on an elliptic friction row, else 1: the elliptic cone becomes the
second-order cone ‖g_t‖ ≤ g_n of slope 1; a pyramid edge or a frictionless row is g ≥ 0) with H = S (A + R) S
positive definite.  The iteration is contact/admm.py's (``admm_map``) at a fixed ρ (√ of the largest and smallest
diagonal entries of H unless given: ``initial_rho``), with no proximal term (H is positive definite) and no De Saxcé
correction (the problem is convex), and MuJoCo's cone for the projection; no Anderson acceleration and no ρ
balancing, as the C loop.  It stops on relative residuals: the primal one ‖x − y‖∞ ≤ tol · ‖y‖∞ and the dual one
ρ ‖y − y_prev‖∞ ≤ tol · max(‖b‖∞, ρ ‖y‖∞), the C loop's rule."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..contact.admm import admm_map, balance, damped_solve, initial_rho
from ..contact.cones import onto_cone
from ..contact.result import SOFT_DEFAULTS
from .soft_contacts import efc_rows

CONVERGED, MAX_ITERATIONS, NOT_FINITE = 0, 1, 2
# the compiled step's statuses (templates/mujoco_step.c.j2 info[3]) by code
STATUS = ("converged", "max iterations", "not finite")


@dataclass(frozen=True)
class SoftProblem:
    """One state's problem in the scaled forces: H (m × m), b (m), the rows' scale S, the contact of each row and E,
    the efc rows on the contacts' world rows (m × the world rows: f acts on them as Eᵀ f)."""
    H: np.ndarray
    b: np.ndarray
    S: np.ndarray
    owner: np.ndarray
    E: np.ndarray
    pyramidal: bool


@dataclass(frozen=True)
class SoftSolve:
    """MuJoCo's efc_force of the contacts' rows, the impulse they put on the world rows (Eᵀ f), iterations, the last
    iteration's (primal, dual) residuals and a status (STATUS)."""
    force: np.ndarray
    lam: np.ndarray
    iterations: int
    residuals: tuple
    status: str


def world_rows(frames, friction, dims, offsets, blocks, pyramidal):
    """(E, S, owner): each contact's efc rows (soft_contacts.efc_rows) on its world rows, 3 (a point fixed in its body:
    the linear velocity) or 6 (its body origin's linear and angular velocity, the point ``offsets[i]`` away: ω × r
    moves the rows' linear part onto the angular one), side by side; each row's scale and contact."""
    rows = efc_rows(frames, friction, dims, pyramidal)
    E = np.zeros((sum(len(e) for e in rows), sum(blocks)))
    S, owner, r, c = [], [], 0, 0
    for i, (e, k, off, mu) in enumerate(zip(rows, blocks, np.asarray(offsets, float).reshape(-1, 3),
                                          np.asarray(friction, float).reshape(-1, 5))):
        # l · (ω × r) = ω · (r × l)
        E[r:r + len(e), c:c + k] = (e[:, :3] if k == 3 else np.hstack([e[:, :3], e[:, 3:] + np.cross(off, e[:, :3])]))
        S += [1.0] * len(e) if pyramidal and int(dims[i]) > 1 else [1.0, *mu[:len(e) - 1]]
        owner += [i] * len(e)
        r, c = r + len(e), c + k
    return E, np.array(S), np.array(owner)


def soft_problem(G, Jv, Ja0, frames, friction, dims, offsets, blocks, R, B, Kr, pyramidal=False):
    """The SoftProblem of one state from the world rows' G = J M⁻¹ Jᵀ, J v and J a₀ (a₀ the unconstrained
    acceleration) and the per-row R, B, Kr (soft_step.soft_parameters): a_ref = −B E J v − Kr."""
    E, S, owner = world_rows(frames, friction, dims, offsets, blocks, pyramidal)
    H = S[:, None] * (E @ G @ E.T + np.diag(R)) * S[None, :]
    return SoftProblem(H, S * (E @ Ja0 + B * (E @ Jv) + Kr), S, owner, E, bool(pyramidal))


def project(g, owner, pyramidal):
    """g projected on the scaled cone: a pyramid edge or a lone (frictionless) row onto g ≥ 0 (NaN onto 0, as the C
    loop's comparison), an elliptic contact's rows [n, t…] onto ‖t‖ ≤ n (cones.onto_cone, slope 1)."""
    y = np.where(g > 0, g, 0.0)
    if pyramidal:
        return y
    for i in np.unique(owner):
        rows = np.flatnonzero(owner == i)
        if len(rows) > 1:
            n, t = g[rows[:1]], g[rows[1:]][None, :]
            n, t = onto_cone(n, t, np.sqrt(np.sum(t * t, axis=1)), np.ones(1))
            y[rows] = np.r_[n, t[0]]
    return y


def admm(p, warm, options):
    """(scaled forces, iterations, (primal, dual), status code) of ADMM on ``p`` from the scaled warm start."""
    m = len(p.b)
    rho = options.rho if options.rho > 0 else initial_rho(p.H, 0.0)
    try:
        factor = np.linalg.cholesky(p.H + rho * np.eye(m))
    except np.linalg.LinAlgError:           # H not positive definite: a NaN or an overflow in it
        return warm, 0, (np.nan, np.nan), NOT_FINITE
    cone = lambda v: project(v, p.owner, p.pyramidal)        # noqa: E731
    T = admm_map(p.b, None, False, 0.0, rho, lambda v: damped_solve(factor, v), cone)
    y = cone(warm)
    w, b_max = np.concatenate([y, y, np.zeros(m)]), np.max(np.abs(p.b))
    k, residual, status = 0, (np.nan, np.nan), MAX_ITERATIONS
    for k in range(1, options.max_iter + 1):
        y_prev, w = w[m:2 * m], T(w)
        x, y = w[:m], w[m:2 * m]
        residual = balance(x, y, y_prev, rho)
        y_max = np.max(np.abs(y))
        if not np.all(np.isfinite([*residual, y_max])):
            status = NOT_FINITE
            break
        scale = b_max if b_max > rho * y_max else rho * y_max          # the C's choice where b holds a NaN
        if residual[0] <= options.tol * y_max and residual[1] <= options.tol * scale:
            status = CONVERGED
            break
    return y, k, residual, status


def solve(p, force_warm=None, options=SOFT_DEFAULTS):
    """The SoftSolve of ``p`` (a SoftProblem) from ``force_warm`` (MuJoCo's forces, None: 0) under ``options`` (tol
    relative, max_iter, rho: result.Options).  The status is "not finite" whenever a force is."""
    warm = np.zeros(len(p.b)) if force_warm is None else np.asarray(force_warm, float) / p.S
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow is the status's to report
        g, k, residual, code = admm(p, warm, options)
        force = g * p.S
    if not np.all(np.isfinite(force)):
        code = NOT_FINITE
    return SoftSolve(force, p.E.T @ force, k, tuple(map(float, residual)), STATUS[code])
