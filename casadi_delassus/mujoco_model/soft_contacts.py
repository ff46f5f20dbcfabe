"""MuJoCo's soft contact model, the per-contact numbers: impedance, regularisation R and the
reference acceleration's coefficients, as MuJoCo's documentation defines them (Computation
chapter, "Soft contact model", "Solver parameters": solref, solimp, impratio; Todorov 2014,
"Convex and analytically-invertible dynamics with contacts and constraints", ICRA).

MuJoCo's contact forces f solve the convex problem

    min_f ½ fᵀ (A + R) f + fᵀ (J a₀ − a_ref)   over f in the cone,   A = J M⁻¹ Jᵀ

(a₀ the unconstrained acceleration, `qacc_smooth`), and qacc = a₀ + M⁻¹ Jᵀ f.  Per contact
(condim rows n, t₁, t₂ on the point's linear velocity, then n, t₁, t₂ on the angular one
for torsional and rolling friction, for the elliptic cone ‖(f_j / μ_j)‖ ≤ f_n; the pyramid's
2 (condim − 1) edges n ± μ_j e_j with f ≥ 0):

- impedance d(r) ∈ [1e-4, 0.9999] of r = dist − margin, from solimp (d₀, d_width, width,
  midpoint, power);
- R = (1 − d)/d · â, with â MuJoCo's approximation of A's diagonal (`body_invweight0`, the
  translational weights of the two bodies); friction rows R_n / impratio · μ₁² / μ_j²; a pyramid's edges
  share 2 μ²/impratio · R of the first edge;
- a_ref = −B·(J v) − K·d·r, with (B, K) from solref (time constant clamped to 2·timestep,
  damping ratio; or −stiffness, −damping), and no position term in elliptic friction rows.

These functions work on arrays (one entry per contact) and need no `mujoco`; the numbers of one
constraint, for every row type, are mujoco_model/soft.py's."""
from __future__ import annotations

import numpy as np

from . import soft
from .constraints import Contact, contact_soft


def clamped(solimp):
    """solimp rows (n_c × 5) as MuJoCo uses them (mujoco_model/soft.py, clean_solimp)."""
    return np.array([soft.clean_solimp(s) for s in np.array(solimp, float).reshape(-1, 5)])


def impedance(r, solimp):
    """d(r): MuJoCo's impedance of violation r (n_c) for solimp rows (n_c × 5) (mujoco_model/soft.py)."""
    return np.array([soft.impedance(float(x), s) for x, s in zip(np.ravel(r), clamped(solimp))])


def stiffness_damping(solref, solimp, timestep, refsafe=True):
    """(K, B) per contact from solref (n_c × 2): (time constant, damping ratio) when positive
    (the time constant at least 2·timestep when ``refsafe``), (−stiffness, −damping) otherwise
    (mujoco_model/soft.py)."""
    pairs = [soft.stiffness_damping(soft.clean_solref(r, timestep, refsafe), s)
             for r, s in zip(np.array(solref, float).reshape(-1, 2), clamped(solimp))]
    return tuple(np.array(x) for x in zip(*pairs)) if pairs else (np.zeros(0), np.zeros(0))


def rows_per_contact(dims, pyramidal):
    """The efc rows of each contact: condim for the elliptic cone, 2 (condim − 1) pyramid edges
    (one row when frictionless)."""
    d = np.asarray(dims, int)
    return np.where(pyramidal & (d > 1), 2 * (d - 1), d)


def soft_rows(dist, margin, solref, solimp, friction, dims, weight, impratio, timestep, pyramidal, refsafe=True,
              solreffriction=None):
    """(R, B, Kr) per efc row (MuJoCo's order, ``rows_per_contact``): the regularisation, the
    damping that multiplies the row's velocity and the position term, so that
    a_ref = −B·(J v) − Kr.  ``friction`` is n_c × 5 (MuJoCo's contact.friction), ``weight`` the
    contact's translational inverse weight (the sum of its two bodies' ``body_invweight0[:, 0]``);
    elliptic friction rows take their damping from ``solreffriction`` (n_c × 2) where it is not
    zero.  The numbers of each contact are mujoco_model/constraints.py's ``contact_soft``."""
    n = len(np.ravel(dist))
    friction = np.asarray(friction, float).reshape(-1, 5)
    solreffriction = np.zeros((n, 2)) if solreffriction is None else np.asarray(solreffriction, float).reshape(-1, 2)
    R, Bs, Kr = [], [], []
    for i in range(n):
        c = Contact(-1, -1, None, None, float(np.ravel(dist)[i]), int(np.ravel(dims)[i]), friction[i],
                    np.asarray(solref, float).reshape(-1, 2)[i], solreffriction[i],
                    np.asarray(solimp, float).reshape(-1, 5)[i], float(np.ravel(margin)[i]))
        # the rotational weight only enters rows whose R comes from the normal's
        for pos, mg, _, _, imp, K, B, Ri in contact_soft(c, float(np.ravel(weight)[i]), 0.0, impratio, timestep,
                                                          refsafe, pyramidal):
            R.append(Ri)
            Bs.append(B)
            Kr.append(K * imp * (pos - mg))
    return np.array(R), np.array(Bs), np.array(Kr)


def efc_rows(frames, friction, dims, pyramidal):
    """Each contact's efc rows acting on its point's world velocity [linear; angular] (k × 6):
    the frame's rows (n, t₁, t₂) on the linear then the angular velocity, the first condim of
    them; or the pyramid's edges n ± μ_j e_j over the same directions e_j."""
    F = np.asarray(frames, float).reshape(-1, 3, 3)
    friction = np.asarray(friction, float).reshape(-1, 5)
    out = []
    for Fi, mu, dim in zip(F, friction, np.asarray(dims, int)):
        e = np.zeros((6, 6))
        e[:3, :3], e[3:, 3:] = Fi, Fi
        if pyramidal and dim > 1:
            out.append(np.array([e[0] + sign * mu[j] * e[j + 1] for j in range(dim - 1) for sign in (1, -1)]))
        else:
            out.append(e[:dim])
    return out
