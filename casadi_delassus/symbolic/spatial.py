"""Spatial algebra over CasADi SX (numpy inputs are lifted to SX constants), in local link
frames, Featherstone's [angular; linear] order.

Transforms are kept compact, rotation + translation (``Transform``), never as 6x6 matrices:
an X applied to a motion vector costs two 3x3 products instead of a 6x6 one.  Rigid-body
inertias are kept as (m, h = m c, Ī about the origin) and symmetric 3x3 blocks are computed
once per unique entry.  CasADi folds products with exact 0 and 1, so numeric data that was
cleaned (model/robot.py) costs nothing where it is structurally zero."""
from __future__ import annotations

import casadi as ca
import numpy as np


def sx(a):
    """Lift a numpy array (or scalar) to SX; SX passes through."""
    return a if isinstance(a, ca.SX) else ca.SX(np.asarray(a, dtype=float))


def skew(v):
    """[v]x, the 3x3 cross-product matrix, for a 3-vector (SX or numpy)."""
    v = sx(v)
    z = ca.SX(0)
    return ca.vertcat(ca.horzcat(z, -v[2], v[1]), ca.horzcat(v[2], z, -v[0]),
                      ca.horzcat(-v[1], v[0], z))


def cross(a, b):
    """a x b for 3-vectors."""
    a, b = sx(a), sx(b)
    return ca.vertcat(a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def cross_columns(a, B):
    """a x B[:, k] for every column of a 3 x k matrix."""
    B = sx(B)
    return ca.horzcat(*[cross(a, B[:, k]) for k in range(B.shape[1])])


def symmetric(entries, n):
    """Build an n x n SX matrix from its upper-triangle entries {(i, j): expr, i <= j},
    sharing each off-diagonal expression between (i, j) and (j, i)."""
    M = ca.SX(n, n)
    for (i, j), e in entries.items():
        M[i, j] = e
        if i != j:
            M[j, i] = e
    return ca.densify(M)


class Transform:
    """^B X_A: E maps A coordinates to B coordinates, r is B's origin in A coordinates."""

    def __init__(self, E, r):
        self.E, self.r = sx(E), sx(r).reshape((3, 1))

    def apply_motion(self, m):
        """X m for motion vectors (6 x k, [ω; v]) given in A, result in B."""
        m = sx(m)
        w, v = m[:3, :], m[3:, :]
        return ca.vertcat(ca.mtimes(self.E, w), ca.mtimes(self.E, v - cross_columns(self.r, w)))

    def transpose_force(self, f):
        """Xᵀ f for force vectors (6 x k, [n; f]) given in B, result in A."""
        f = sx(f)
        n, lin = ca.mtimes(self.E.T, f[:3, :]), ca.mtimes(self.E.T, f[3:, :])
        return ca.vertcat(n + cross_columns(self.r, lin), lin)

    def transpose_rows(self, K):
        """K X for row blocks K (k x 6) acting on motions in B: rows acting on motions in A."""
        return self.transpose_force(sx(K).T).T

    def __matmul__(self, other):
        """^C X_B @ ^B X_A = ^C X_A."""
        return Transform(ca.mtimes(self.E, other.E), other.r + ca.mtimes(other.E.T, self.r))

    def inverse(self):
        """^A X_B for ^B X_A."""
        return Transform(self.E.T, -ca.mtimes(self.E, self.r))


class RigidInertia:
    """A rigid-body (or composite) spatial inertia: mass m, first moment h = m c and
    rotational inertia Ī about the frame origin (symmetric).  Moved between frames by
    frames.transform_rigid."""

    def __init__(self, mass, h, I_origin):
        self.mass, self.h, self.I = sx(mass), sx(h).reshape((3, 1)), sx(I_origin)

    def __add__(self, other):
        return RigidInertia(self.mass + other.mass, self.h + other.h, self.I + other.I)

    def matrix(self):
        """The 6x6 spatial inertia [[Ī, h×], [h×ᵀ, m 1]]."""
        hx = skew(self.h)
        return ca.vertcat(ca.horzcat(self.I, hx), ca.horzcat(hx.T, self.mass * ca.SX.eye(3)))

    def times(self, m):
        """I m for motion vectors (6 x k) without forming the 6x6 matrix."""
        m = sx(m)
        w, v = m[:3, :], m[3:, :]
        return ca.vertcat(ca.mtimes(self.I, w) + cross_columns(self.h, v),
                          self.mass * v - cross_columns(self.h, w))
