"""The articulated-body inertia sweep H_i^A (backward, leaves first), shared by the
PV-family Delassus algorithms and constrained-dynamics solvers.

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, eq. (42a) and Alg. 2 lines 5-6;
PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, eqs. (7)-(8), Alg. 1 lines 7-10.
In local link frames:

    U_i = H_i^A S_i,  D_i = S_iᵀ U_i,  H_i^a = H_i^A − U_i D_i⁻¹ U_iᵀ,
    H_λ(i)^A += ^iX_λ(i)ᵀ H_i^a ^iX_λ(i).

What keeps it cheap:
- Symmetric 6x6 matrices are dense SX whose (i, j) and (j, i) entries are one expression.
- S_i = ±e_a picks U_i as a column of H_i^A; H_i^a's row and column a are exact zeros
  (CasADi cannot see d − d·d/d = 0), so the plane rotation about a turns 15 entries, not 21.
- Xᵀ H X goes through frames.transform_inertia (double-angle plane rotation, shift, numeric
  E_T); the numeric parts of a parent's sum (its own H_i) are added once.
- A free joint (S = a permutation of I₆) keeps D_i = the 6x6 H_i^A as LDLᵀ factors, never
  an inverse; its projected inertia is exactly zero (nothing passes to a parent).
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..spatial import sx, symmetric
from . import linalg
from .frames import body_inertia, transform_inertia


@dataclass
class ArticulatedJoint:
    """Per-body results of the sweep (body coordinates, [angular; linear] order)."""
    HA: ca.SX              # H_i^A (6x6, symmetric)
    S: np.ndarray          # S_i (6 x n_i), numeric
    U: ca.SX               # U_i = H_i^A S_i (6 x n_i)
    D: ca.SX               # D_i = S_iᵀ H_i^A S_i (n_i x n_i)
    Dinv: ca.SX | None     # D_i⁻¹ for 1-DoF joints (one reciprocal); None for a free joint
    Ubar: ca.SX | None     # U_i D_i⁻¹ (6 x 1) for 1-DoF joints
    Ha: ca.SX              # projected H_i^a = H_i^A − U_i D_i⁻¹ U_iᵀ (6x6, symmetric)
    axis: int | None       # a with S_i = sign · e_a, when S_i is a coordinate vector
    sign: float            # that sign
    ldl: tuple | None      # (L, d, d⁻¹) of D_i for a free joint (linalg.ldl), else None

    @property
    def free(self):
        return self.ldl is not None


def unit_axis(S):
    """(a, sign) when the single column S is sign · e_a, else (None, 1)."""
    if S.shape[1] != 1:
        return None, 1.0
    nz = np.flatnonzero(S[:, 0])
    if len(nz) == 1 and abs(S[nz[0], 0]) == 1.0:
        return int(nz[0]), float(S[nz[0], 0])
    return None, 1.0


def project(body, HA):
    """U, D, D⁻¹, U D⁻¹ and H^a for one joint."""
    S = body.joint.motion_subspace()
    HA = sx(HA)
    if body.joint.kind == "free":
        U = ca.mtimes(HA, sx(S))
        Dm = ca.mtimes(sx(S).T, U)
        fac = linalg.ldl({(a, b): Dm[a, b] for a in range(6) for b in range(a, 6)}, 6)
        return ArticulatedJoint(HA, S, U, Dm, None, None, ca.SX.zeros(6, 6), None, 1.0, fac)
    a, sign = unit_axis(S)
    if a is not None:
        U = sign * HA[:, a]                           # H^A S: a column, no products
        D = HA[a, a]
    else:
        U = ca.mtimes(HA, sx(S))
        D = ca.dot(sx(S), U)
    Dinv = 1 / D
    Ubar = U * Dinv
    ent = {(p, q): 0 if a in (p, q) else HA[p, q] - U[p] * Ubar[q]      # H^a S = 0
           for p in range(6) for q in range(p, 6)}
    return ArticulatedJoint(HA, S, U, D, Dinv, Ubar, symmetric(ent, 6), a, sign, None)


def _sum(const, terms):
    """const (numeric 6x6) + Σ terms (symmetric SX), each entry summed once."""
    ent = {}
    for a in range(6):
        for b in range(a, 6):
            e = 0
            for T in terms:
                if not T[a, b].is_zero():
                    e = T[a, b] if isinstance(e, int) else e + T[a, b]
            k = float(const[a, b])
            if k and isinstance(e, int):
                e = k
            elif k:                                 # e − |k| shares the constant of a +|k| entry
                e = e + k if k > 0 else e - (-k)
            ent[(a, b)] = e
    return symmetric(ent, 6)


def articulated_inertias(robot, T):
    """[ArticulatedJoint per body] for T = frames.local_transforms(robot, q[, offsets]),
    in the frames of T."""
    const = [body_inertia(b, t.o) for b, t in zip(robot.bodies, T)]     # H_i, numeric
    terms = [[] for _ in robot.bodies]
    out = [None] * robot.n_bodies
    for i in reversed(range(robot.n_bodies)):
        out[i] = J = project(robot.bodies[i], _sum(const[i], terms[i]))
        p = robot.parent(i)
        if p < 0 or J.free:
            continue
        terms[p].append(transform_inertia(T[i], J.Ha))       # H_λ(i)^A += Xᵀ H^a X
    return out
