"""MuJoCo's soft contact model, the per-contact numbers: impedance, regularisation R and the
reference acceleration's coefficients, as MuJoCo's documentation defines them (Computation
chapter, "Soft contact model", "Solver parameters": solref, solimp, impratio; Todorov 2014,
"Convex and analytically-invertible dynamics with contacts and constraints", ICRA).

MuJoCo's contact forces f solve the convex problem

    min_f ½ fᵀ (A + R) f + fᵀ (J a₀ − a_ref)   over f in the cone,   A = J M⁻¹ Jᵀ

(a₀ the unconstrained acceleration, `qacc_smooth`), and qacc = a₀ + M⁻¹ Jᵀ f.  Per contact
(condim 3, rows [n, t₁, t₂] for the elliptic cone; four edges n ± μ t_j for the pyramidal one):

- impedance d(r) ∈ [1e-4, 0.9999] of r = dist − margin, from solimp (d₀, d_width, width,
  midpoint, power);
- R = (1 − d)/d · â, with â MuJoCo's approximation of A's diagonal (`body_invweight0`, the
  translational weights of the two bodies); friction rows R_n / impratio; a pyramid's edges
  share 2 μ²/impratio · R of the first edge;
- a_ref = −B·(J v) − K·d·r, with (B, K) from solref (time constant clamped to 2·timestep,
  damping ratio; or −stiffness, −damping), and no position term in elliptic friction rows.

These functions work on arrays (one entry per contact) and need no `mujoco`."""
from __future__ import annotations

import numpy as np

MIN_IMP, MAX_IMP, MINVAL = 1e-4, 0.9999, 1e-15


def clamped(solimp):
    """solimp rows (n_c × 5) with d₀ and d_width clamped to [1e-4, 0.9999], as MuJoCo uses them."""
    s = np.array(solimp, float).reshape(-1, 5)
    s[:, :2] = np.clip(s[:, :2], MIN_IMP, MAX_IMP)
    return s


def impedance(r, solimp):
    """d(r): MuJoCo's impedance of violation r (n_c) for solimp rows (n_c × 5), clamped to [1e-4, 0.9999]."""
    d0, dw, width, mid, power = clamped(solimp).T
    x = np.minimum(np.abs(np.asarray(r, float)) / np.maximum(width, MINVAL), 1.0)
    low = x ** power / np.maximum(mid, MINVAL) ** (power - 1)
    high = 1 - (1 - x) ** power / np.maximum(1 - mid, MINVAL) ** (power - 1)
    y = np.where(x >= 1, 1.0, np.where(power == 1, x, np.where(x <= mid, low, high)))
    d = np.where((d0 == dw) | (width <= MINVAL), 0.5 * (d0 + dw), d0 + y * (dw - d0))
    return np.clip(d, MIN_IMP, MAX_IMP)


def stiffness_damping(solref, solimp, timestep, refsafe=True):
    """(K, B) per contact from solref (n_c × 2): (time constant, damping ratio) when positive
    (the time constant at least 2·timestep when ``refsafe``), (−stiffness, −damping) otherwise."""
    ref = np.array(solref, float).reshape(-1, 2)
    dmax = clamped(solimp)[:, 1]
    if refsafe:
        ref[:, 0] = np.where(ref[:, 0] > 0, np.maximum(ref[:, 0], 2 * timestep), ref[:, 0])
    tc, dr = ref.T
    K = np.where(tc > 0, 1 / np.maximum(MINVAL, dmax ** 2 * tc ** 2 * dr ** 2), -tc / np.maximum(MINVAL, dmax ** 2))
    B = np.where(dr > 0, 2 / np.maximum(MINVAL, dmax * tc), -dr / np.maximum(MINVAL, dmax))
    return K, B


def soft_rows(dist, margin, solref, solimp, mu, weight, impratio, timestep, pyramidal, refsafe=True):
    """(R, B, Kr) per efc row (3 or 4 rows per contact, MuJoCo's order): the regularisation, the
    damping that multiplies the row's velocity and the position term, so that
    a_ref = −B·(J v) − Kr.  ``weight`` is the contact's translational inverse weight (the sum of
    its two bodies' ``body_invweight0[:, 0]``)."""
    r = np.asarray(dist, float) - np.asarray(margin, float)
    d = impedance(r, solimp)
    K, B = stiffness_damping(solref, solimp, timestep, refsafe)
    mu, weight = np.asarray(mu, float), np.asarray(weight, float)
    ratio = max(MINVAL, impratio)
    if pyramidal:
        R0 = np.maximum(MINVAL, (1 - d) * weight * (1 + mu ** 2) / d)
        R = np.repeat(2 * mu ** 2 / ratio * R0, 4)
        return R, np.repeat(B, 4), np.repeat(K * d * r, 4)
    Rn = np.maximum(MINVAL, (1 - d) * weight / d)
    R = np.stack([Rn, Rn / ratio, Rn / ratio], axis=1).ravel()
    Kr = np.stack([K * d * r, 0 * r, 0 * r], axis=1).ravel()
    return R, np.repeat(B, 3), Kr


def efc_rows(frames, mu, pyramidal):
    """E (n_c blocks of 3 or 4 rows × 3): each contact's efc rows acting on its point's world
    velocity, from its frame (rows n, t₁, t₂): the frame itself, or the pyramid's edges
    n + μ t₁, n − μ t₁, n + μ t₂, n − μ t₂."""
    F = np.asarray(frames, float).reshape(-1, 3, 3)
    if not pyramidal:
        return F
    mu = np.asarray(mu, float)[:, None]
    n, t1, t2 = F[:, 0], F[:, 1], F[:, 2]
    return np.stack([n + mu * t1, n - mu * t1, n + mu * t2, n - mu * t2], axis=1)
