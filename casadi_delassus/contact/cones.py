"""Friction cones, their projections and the De Saxcé correction.

A contact's rows are [t₁, t₂, n] (../shared/DESIGN.md, "Contact rows").  The Coulomb cone of
friction μ is K_μ = {λ : ‖λ_t‖ ≤ μ λ_n}; its dual is K_μ* = K_{1/μ} = {σ : μ ‖σ_t‖ ≤ σ_n}.
Acary, Brémond and Huber (the De Saxcé formulation, as used by Carpentier et al. 2024, "From
compliant to rigid contact simulation: a unified and efficient approach", RSS, and by
Pinocchio 4's solvers) write the exact Coulomb law as the nonlinear complementarity problem

    K_μ ∋ λ ⊥ σ + Γ(σ) ∈ K_μ*,    Γ(σ) = (0, 0, μ ‖σ_t‖),

whose convex relaxation (Anitescu) drops Γ.  Arrays here hold all contacts stacked, shape
(..., 3 n_c), with μ of shape (n_c,).
"""
from __future__ import annotations

import numpy as np


def blocks(x):
    """View a stacked contact vector (3 n_c,) as (n_c, 3) rows [t₁, t₂, n]."""
    return np.asarray(x, dtype=float).reshape(-1, 3)


def project_cone(x, mu):
    """Euclidean projection of each contact's 3-vector onto K_μ (second-order cone of slope μ)."""
    b = blocks(x).copy()
    mu = np.broadcast_to(np.asarray(mu, dtype=float), (len(b),))
    b[:, 2], b[:, :2] = onto_cone(b[:, 2], b[:, :2], np.hypot(b[:, 0], b[:, 1]), mu)
    return b.reshape(-1)


def onto_cone(n, t, r, mu):
    """(n', t'): the Euclidean projection of each (t_i, n_i) onto the second-order cone ‖t‖ ≤ μ n, t of any width (k ×
    d: the Coulomb cone's two tangents, MuJoCo's elliptic cone's up to five, mujoco_model/soft_admm.py), r = ‖t_i‖ as
    the caller rounds it."""
    n, t = np.array(n, dtype=float), np.array(t, dtype=float)
    polar = mu * r <= -n                # in the polar cone: projects to the apex
    side = ~((r <= mu * n) | polar)
    # onto the generator through (μ t / r, 1): scale (μ r + n) / (1 + μ²)
    a = (mu[side] * r[side] + n[side]) / (1.0 + mu[side] ** 2)
    t[side] *= (mu[side] * a / r[side])[:, None]
    n[side] = a
    n[polar], t[polar] = 0.0, 0.0
    return n, t


def project_disk(t, radius):
    """Each 2-vector of ``t`` (n_c, 2) shrunk onto the disk of its ``radius`` (≥ 0)."""
    r = np.hypot(t[:, 0], t[:, 1])
    scale = np.where(r > radius, radius / np.where(r > 0, r, 1.0), 1.0)
    return t * scale[:, None]


def de_saxce(sigma, mu):
    """Γ(σ) = (0, 0, μ‖σ_t‖) per contact, stacked like σ."""
    b = blocks(sigma)
    out = np.zeros_like(b)
    out[:, 2] = np.asarray(mu, dtype=float) * np.hypot(b[:, 0], b[:, 1])
    return out.reshape(-1)


def cone_distance(x, mu):
    """Per contact, the Euclidean distance of x to K_μ (0 inside)."""
    return np.linalg.norm(blocks(x) - blocks(project_cone(x, mu)), axis=1)


def dual_cone_distance(x, mu):
    """Per contact, the distance to K_μ* = {μ‖x_t‖ ≤ x_n}; for μ = 0 (frictionless) the
    half-space x_n ≥ 0 (the tangential rows are free)."""
    b = blocks(x)
    mu = np.broadcast_to(np.asarray(mu, dtype=float), (len(b),))
    out = np.maximum(-b[:, 2], 0.0)
    rough = mu > 0
    if rough.any():
        out[rough] = cone_distance(b[rough].reshape(-1), 1.0 / mu[rough])
    return out
