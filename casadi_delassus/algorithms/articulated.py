"""The articulated-body inertia sweep H_i^A (backward, leaves first), shared by the
PV-family Delassus algorithms and constrained-dynamics solvers.

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, eq. (42a) and Alg. 2 lines 5-6;
PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, eqs. (7)-(8), Alg. 1 lines 7-10.
In local link frames:

    U_i = H_i^A S_i,  D_i = S_iᵀ U_i,  H_i^a = H_i^A − U_i D_i⁻¹ U_iᵀ,
    H_λ(i)^A += ^iX_λ(i)ᵀ H_i^a ^iX_λ(i).

Symmetric 6x6 matrices are dense SX whose (i, j) and (j, i) entries are one expression, each
computed once.  A 1-DoF joint whose S_i is a signed unit vector e_a picks U_i as a column of
H_i^A for free, and H_i^a's row and column a are written as exact zeros (CasADi cannot see
d − d·d/d = 0).  A free joint (S = a permutation of I₆) has D_i = the 6x6 H_i^A, kept as its
LDLᵀ factors; its projected inertia is exactly zero (nothing passes to a parent).
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..spatial import skew, sx, symmetric
from . import linalg


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


def rigid_matrix(body):
    """H_i (6x6 numeric): the body's spatial inertia about its origin."""
    return body.spatial_inertia()


def inertia_to_parent(X, H):
    """Xᵀ H X for a symmetric 6x6 H in child coordinates, X = ^iX_λ(i) compact: rotate the
    three 3x3 blocks by E, then shift by r; only the upper entries are kept (the rest never
    reaches an output, so it costs nothing)."""
    E, r = X.E, X.r
    I, C, M = H[:3, :3], H[:3, 3:], H[3:, 3:]
    Ir = _rotate(E, I, sym=True)
    Mr = _rotate(E, M, sym=True)
    Cr = ca.mtimes(E.T, ca.mtimes(C, E))
    rx = skew(r)
    C2 = Cr + ca.mtimes(rx, Mr)               # top-right block: Cr + r× Mr
    Z = ca.mtimes(Cr, rx)                     # Cr r×
    W = ca.mtimes(C2, rx)                     # (Cr + r× Mr) r× = Z + r× Mr r×
    out = {}
    for a in range(3):
        for b in range(a, 3):
            out[(a, b)] = Ir[a, b] - Z[b, a] - W[a, b]      # Ir + r×Crᵀ − Cr r× − r×Mr r×
            out[(3 + a, 3 + b)] = Mr[a, b]
        for b in range(3):
            out[(a, 3 + b)] = C2[a, b]
    return symmetric(out, 6)


def _rotate(E, A, sym):
    """Eᵀ A E (upper entries only matter when ``sym``)."""
    return ca.mtimes(E.T, ca.mtimes(A, E))


def add_sym(A, B):
    """A + B for symmetric 6x6, each unique entry once."""
    return symmetric({(a, b): A[a, b] + B[a, b] for a in range(6) for b in range(a, 6)}, 6)


def project(body, HA):
    """U, D, D⁻¹, U D⁻¹ and H^a for one joint."""
    S = body.joint.motion_subspace()
    HA = sx(HA)
    if body.joint.kind == "free":
        U = ca.mtimes(HA, sx(S))
        Dm = ca.mtimes(sx(S).T, U)
        upper = {(a, b): Dm[a, b] for a in range(6) for b in range(a, 6)}
        fac = linalg.ldl(upper, 6)
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
    ent = {}
    for p in range(6):
        for q in range(p, 6):
            ent[(p, q)] = 0 if a in (p, q) else HA[p, q] - U[p] * Ubar[q]    # H^a S = 0
    return ArticulatedJoint(HA, S, U, D, Dinv, Ubar, symmetric(ent, 6), a, sign, None)


def articulated_inertias(robot, X):
    """[ArticulatedJoint per body]: H_i^A with every subtree's projected inertia added."""
    HA = [sx(rigid_matrix(b)) for b in robot.bodies]
    out = [None] * robot.n_bodies
    for i in reversed(range(robot.n_bodies)):
        out[i] = project(robot.bodies[i], HA[i])
        p = robot.parent(i)
        if p >= 0 and not out[i].free:
            HA[p] = add_sym(HA[p], inertia_to_parent(X[i], out[i].Ha))   # H_λ(i)^A += Xᵀ H^a X
    return out
