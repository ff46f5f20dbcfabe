"""Structured joint transforms in local link frames, and a cheap choice of those frames.

^iX_λ(i) = X_J(q) X_T with X_T = T(r_J) R(E_T): the constant part rotates by E_T and shifts
by r_J = E_T r (r: the joint's origin in parent coordinates), so the shift is applied in joint
coordinates first.  For a revolute joint about a coordinate axis k, X_J only rotates the
(i, j) plane: 6x6 symmetric matrices are turned with double-angle formulas (10 operations
for a symmetric 2x2 block, instead of 21), rows with 2x2 rotations, and the numeric E_T is
applied by coefficient, so ±1 entries cost nothing.

Frames: a body's frame may slide along its own joint axis (anywhere, for free and prismatic
joints) without changing S_i, and the Delassus matrix does not depend on it.  `choose_offsets`
slides unconstrained bodies so that more components of the r_J become exact zeros: each one
saves about 26 operations in the articulated-inertia sweep and 4 per constraint row carried
through the joint.  (PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. IV-A:
local frames are what make these algorithms cheap.)
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..model.robot import clean, cross_matrix
from ..spatial import Transform, cross_columns, sx, symmetric
from . import kinematics


@dataclass
class LocalTransform:
    """^iX_λ(i) (``X``, compact) and its parts: X_J = rotation about e_k by (c, t = ±sin)
    when ``k`` is set, then the numeric E_T and shift r_J (joint coordinates)."""
    X: Transform
    k: int | None = None
    c: ca.SX | None = None
    t: ca.SX | None = None
    E_T: np.ndarray | None = None
    r_J: np.ndarray | None = None
    o: np.ndarray | None = None            # the body frame's offset (body coordinates)


def body_inertia(body, o):
    """H_i (6x6 numeric) about the body's origin moved by ``o`` (body coordinates)."""
    c = cross_matrix(clean(body.com - o, 1e-12))
    return np.block([[body.inertia - body.mass * c @ c, body.mass * c],
                     [-body.mass * c, body.mass * np.eye(3)]])


def local_transforms(robot, q, offsets=None):
    """One LocalTransform per body, in frames moved by ``offsets`` (see choose_offsets)."""
    o = np.zeros((robot.n_bodies, 3)) if offsets is None else offsets
    out = []
    for i, b in enumerate(robot.bodies):
        j, n, p = b.joint, b.q_index, b.parent
        r = clean(b.translation + b.rotation.T @ o[i] - (o[p] if p >= 0 else 0), 1e-12)
        axis = None if j.axis is None else np.asarray(j.axis, float)
        if j.kind in ("revolute", "continuous") and np.count_nonzero(axis) == 1:
            k = int(np.flatnonzero(axis)[0])
            c, s = (ca.cos(q[n]), ca.sin(q[n])) if j.kind == "revolute" else (q[n], q[n + 1])
            t = s if axis[k] > 0 else -s
            E = ca.SX.eye(3)                   # E_J = R(axis, θ)ᵀ, entries written out
            a, bb = (k + 1) % 3, (k + 2) % 3
            E[a, a], E[bb, bb], E[a, bb], E[bb, a] = c, c, t, -t
            E_T = clean(b.rotation, 1e-10)         # model rotations by π carry ~1e-11 noise
            out.append(LocalTransform(Transform(ca.mtimes(E, sx(E_T)), r), k, c, t,
                                      E_T, clean(E_T @ r, 1e-12), o[i]))
        else:
            X = kinematics.joint_transform(b, q)
            # a free body's offset turns with its joint; the others' lie along S_i
            shift = ca.mtimes(X.E.T, sx(o[i])) - sx(b.rotation.T @ o[i]) if j.kind == "free" else 0
            out.append(LocalTransform(Transform(X.E, X.r + sx(r - b.translation).reshape((3, 1)) + shift),
                                      o=o[i]))
    return out


# -- transforming symmetric 6x6 matrices and constraint rows --------------------------------


class PlaneRotation:
    """X_J for a rotation about e_k; c², c t, cos 2θ, sin 2θ computed once per joint.
    Uses c² + t² = 1 (a revolute angle, or a unit (cos, sin) pair as Pinocchio requires)."""

    def __init__(self, T):
        self.k, self.c, self.t = T.k, T.c, T.t
        self.i, self.j = (T.k + 1) % 3, (T.k + 2) % 3
        self.cc, self.ct = self.c * self.c, self.c * self.t
        self.C2 = 2 * self.cc - 1                 # cos 2θ
        self.S2 = 2 * self.ct                     # ±sin 2θ

    def vec(self, x, y):
        """(x, y) E: a row pair in the plane."""
        return x * self.c - y * self.t, x * self.t + y * self.c

    def sym2(self, a, b, d):
        """Eᵀ [[a, b], [b, d]] E → (a', b', d'), trace kept: 10 operations."""
        delta = a - d
        a2 = d + delta * self.cc - b * self.S2
        return a2, delta * self.ct + b * self.C2, (a + d) - a2

    def gen2(self, a, b, e, d):
        """Eᵀ [[a, b], [e, d]] E → (a', b', e', d'), for a general 2x2 block."""
        delta, beta = a - d, b + e
        a2 = d + delta * self.cc - beta * self.ct
        n = delta * self.ct - beta * (1 - self.cc)
        return a2, n + b, n + e, (a + d) - a2

    def sym6(self, H):
        """X_Jᵀ H X_J: plane pairs (i, j) and (3+i, 3+j), fixed k and 3+k."""
        i, j, k = self.i, self.j, self.k
        out = {}
        for f in (k, 3 + k):
            for g in (k, 3 + k):
                if f <= g:
                    out[(f, g)] = H[f, g]
            for p in (0, 3):
                for idx, v in zip((p + i, p + j), self.vec(H[f, p + i], H[f, p + j])):
                    out[(min(f, idx), max(f, idx))] = v
        for p in (0, 3):
            out[(p + i, p + i)], out[(p + i, p + j)], out[(p + j, p + j)] = \
                self.sym2(H[p + i, p + i], H[p + i, p + j], H[p + j, p + j])
        out[(i, 3 + i)], out[(i, 3 + j)], out[(j, 3 + i)], out[(j, 3 + j)] = \
            self.gen2(H[i, 3 + i], H[i, 3 + j], H[j, 3 + i], H[j, 3 + j])
        return symmetric(out, 6)

    def rows(self, K):
        """K X_J for rows acting on motions: both 3-blocks turned in the plane."""
        K = ca.SX(K)
        for p in (0, 3):
            for r in range(K.shape[0]):
                K[r, p + self.i], K[r, p + self.j] = self.vec(K[r, p + self.i], K[r, p + self.j])
        return K


def _lin(coefs):
    """Σ w x for numeric weights: ±1 without a product, zeros skipped."""
    e = 0
    for w, x in coefs:
        if w == 0 or (isinstance(x, ca.SX) and x.is_zero()):
            continue
        term, neg = (x, w < 0) if abs(w) == 1 else (w * x, False)
        if isinstance(e, int):
            e = -term if neg else term
        else:
            e = e - term if neg else e + term
    return e


def rotate(H, E):
    """R(E)ᵀ H R(E) for symmetric 6x6 H: a numeric signed permutation E only relabels
    entries; otherwise each 3x3 block goes through Eᵀ (A E), E's zeros and ones folded."""
    if isinstance(E, np.ndarray) and np.array_equal(E, np.eye(3)):
        return H
    out = {}
    if isinstance(E, np.ndarray) and np.count_nonzero(E) == 3:
        for a in range(6):
            for b in range(a, 6):
                pa, pb, ia, ib = 3 * (a // 3), 3 * (b // 3), a % 3, b % 3
                c1, c2 = int(np.flatnonzero(E[:, ia])[0]), int(np.flatnonzero(E[:, ib])[0])
                out[(a, b)] = _lin([(E[c1, ia] * E[c2, ib], H[pa + c1, pb + c2])])
        return symmetric(out, 6)
    Es = sx(E)
    for p, s in ((0, 0), (0, 3), (3, 3)):
        B = ca.mtimes(Es.T, ca.mtimes(H[p:p + 3, s:s + 3], Es))
        for a in range(3):
            for b in range(3):
                if p + a <= s + b:
                    out[(p + a, s + b)] = B[a, b]
    return symmetric(out, 6)


def translate(H, r):
    """T(r)ᵀ H T(r), T(r) = [[1, 0], [−r×, 1]]: the inertia about a point moved by −r.
    Written with cross products so each component of r is one constant, sign included."""
    if not isinstance(r, ca.SX) and not np.any(r):
        return H
    r = sx(r)
    I, C, M = H[:3, :3], H[:3, 3:], H[3:, 3:]
    prod = {}                                 # r_k M_ab = r_k M_ba: one product

    def rM(k, a, b):
        key = (k, min(a, b), max(a, b))
        if key not in prod:
            prod[key] = r[k] * M[a, b]
        return prod[key]
    C2 = C + ca.vertcat(*[ca.horzcat(*[rM((a + 1) % 3, (a + 2) % 3, b) - rM((a + 2) % 3, (a + 1) % 3, b)
                                       for b in range(3)]) for a in range(3)])    # C + r× M
    rC = cross_columns(r, C.T)                # column b: r × (row b of C)
    rC2 = cross_columns(r, C2.T)
    out = {}
    for a in range(3):
        for b in range(a, 3):
            out[(a, b)] = I[a, b] + rC[a, b] + rC2[b, a]     # I + r×Cᵀ − C r× − r×M r×
            out[(3 + a, 3 + b)] = M[a, b]
        for b in range(3):
            out[(a, 3 + b)] = C2[a, b]
    return symmetric(out, 6)


def transform_inertia(T, H):
    """^iX_λ(i)ᵀ H ^iX_λ(i) for a symmetric 6x6 H in child coordinates: for a plane-rotation
    joint X_J, then the shift r_J and E_T; otherwise X = R(E) T(r) in one piece."""
    if T.k is None:
        return translate(rotate(H, T.X.E), T.X.r)
    return rotate(translate(PlaneRotation(T).sym6(H), T.r_J), T.E_T)


def transform_rows(T, K):
    """K ^iX_λ(i) for constraint rows K (m x 6) acting on the child's motion."""
    if T.k is None:
        return T.X.transpose_rows(K)
    K = PlaneRotation(T).rows(K)
    if np.any(T.r_J):                                     # [a, l] T(r) = [a + r × l, l]
        K = Transform(np.eye(3), T.r_J).transpose_rows(K)
    if not np.array_equal(T.E_T, np.eye(3)):
        K = ca.horzcat(*[ca.vertcat(*[_lin([(T.E_T[c, col], K[r, 3 * p + c]) for c in range(3)])
                                      for r in range(K.shape[0])])
                         for p in (0, 1) for col in range(3)])
    return K


# -- choosing the frames ----------------------------------------------------------------------


def choose_offsets(robot, constraints, passes=2):
    """Per-body origin offsets o_i (body coordinates) that zero components of the joint shifts
    r_J; constrained bodies keep their frames (their K_i stay as given)."""
    n = robot.n_bodies
    o = np.zeros((n, 3))
    rows = np.zeros(n)
    fixed = np.zeros(n, bool)
    for c in constraints.constraints:
        fixed[c.body] = True
        i = c.body
        while i >= 0:
            rows[i] += c.rows
            i = robot.parent(i)
    weight = [0.0 if b.joint.kind == "free" else 26.0 + 4.5 * rows[i] for i, b in enumerate(robot.bodies)]
    kids = [robot.children(i) for i in range(n)]
    E_T = [clean(b.rotation, 1e-10) for b in robot.bodies]

    def r_J(i):
        b, p = robot.bodies[i], robot.parent(i)
        return clean(E_T[i] @ (b.translation - (o[p] if p >= 0 else 0)) + o[i], 1e-12)

    def cost(i):
        return sum(weight[c] * np.count_nonzero(r_J(c)) for c in [i] + kids[i])

    for _ in range(passes):
        for i, b in enumerate(robot.bodies):
            if fixed[i]:
                continue
            kind = b.joint.kind
            dirs = [b.joint.axis] if kind in ("revolute", "continuous") else list(np.eye(3))
            for d in dirs:
                d = np.asarray(d, float)
                cands = {0.0}
                for c in [i] + kids[i]:               # values that zero one component
                    eff = d if c == i else -E_T[c] @ d
                    base = r_J(c) - (eff * (o[i] @ d))
                    cands |= {float(-base[m] / eff[m]) for m in range(3) if abs(eff[m]) > 1e-6}
                best, start = None, o[i] - d * (o[i] @ d)
                for t in sorted(cands):
                    o[i] = start + t * d
                    cst = cost(i)
                    if best is None or cst < best[0] - 1e-9:
                        best = (cst, t)
                o[i] = start + best[1] * d
    return o
