"""Joint transforms ^iX_λ(i)(q) in local link frames, the one home of every transform the
algorithms apply to motions, forces, constraint rows, inertias and inverse inertias, and a
cheap choice of those frames.

^iX_λ(i) = X_J(q) X_T with X_T = T(r_J) R(E_T): the constant part rotates by E_T and shifts
by r_J = E_T r (r: the joint's origin in parent coordinates), so the shift is applied in joint
coordinates first.  For a revolute joint about a coordinate axis k, X_J only turns the (i, j)
plane of k (``PlaneRotation``): a vector pair costs 6 operations, a symmetric 2x2 block 9
(double-angle form, the trace kept), a general 2x2 block 12, k components pass for free;
the numeric E_T is applied by coefficient, so ±1 entries cost nothing, and each component
of r_J is one constant.  Other joints (free, prismatic, axes off the coordinate axes) use
the compact rotation + translation of ``joint_transform``.

Frames: a body's frame may slide along its own joint axis (anywhere, for free and prismatic
joints) without changing S_i, and the Delassus matrix does not depend on it.  `choose_offsets`
slides unconstrained bodies so that more components of the r_J become exact zeros: each one
saves about 26 operations in the articulated-inertia sweep and 4 per constraint row carried
through the joint.  (PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. IV-A:
local frames are what make these algorithms cheap.)

Conventions: spatial vectors are [angular; linear] (Featherstone); a vector is a list of 6
scalars (SX or exact numbers), symmetric 6x6 matrices are SX whose (a, b) and (b, a) entries
are one expression, constraint rows are SX (rows x 6) acting on motions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import casadi as ca
import numpy as np

from ..model.integrate import quaternion_rotation
from ..model.robot import clean, cross_matrix
from .spatial import RigidInertia, Transform, cross_columns, sx, symmetric
from . import linalg
from .scalar import add_cross, dot, lin, mat_vec, pm


# -- the generic joint transform ---------------------------------------------------------------


def _revolute_rotation(axis, c, s):
    """E_J = R(axis, θ)ᵀ.  For an axis along ±x, ±y, ±z the entries are written out so
    no c + (1 - c) survives (CasADi would not fold it to 1)."""
    k = int(np.argmax(np.abs(axis)))
    if abs(axis[k]) == 1.0:
        sign = float(axis[k])
        i, j = (k + 1) % 3, (k + 2) % 3
        E = ca.SX.eye(3)
        E[i, i], E[j, j] = c, c
        E[i, j], E[j, i] = sign * s, -sign * s
        return E
    a = sx(axis)
    return c * ca.SX.eye(3) + (1 - c) * ca.mtimes(a, a.T) - s * ca.skew(a)


def joint_transform(body, q):
    """^iX_λ(i) = X_J(q_i) X_T(i) as a compact ``Transform``, in the model's body frames."""
    j, k = body.joint, body.q_index
    E_T, r_T = body.rotation, body.translation
    if j.kind in ("revolute", "continuous"):
        c, s = (ca.cos(q[k]), ca.sin(q[k])) if j.kind == "revolute" else (q[k], q[k + 1])
        return Transform(ca.mtimes(_revolute_rotation(j.axis, c, s), sx(E_T)), r_T)
    if j.kind == "prismatic":
        return Transform(E_T, sx(r_T).reshape((3, 1)) + ca.mtimes(sx(E_T).T, sx(j.axis) * q[k]))
    # free joint: position p in the parent, unit quaternion (x, y, z, w) body -> parent
    R = quaternion_rotation([q[k + 3 + i] for i in range(4)])
    X_J = Transform(R.T, q[k:k + 3])
    if np.allclose(E_T, np.eye(3)) and not np.any(r_T):
        return X_J
    return Transform(ca.mtimes(X_J.E, sx(E_T)), sx(r_T).reshape((3, 1)) + ca.mtimes(sx(E_T).T, X_J.r))


# -- local transforms ----------------------------------------------------------------------------


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
    axis: np.ndarray | None = field(default=None, repr=False)   # S_i's axis (body coordinates)

    @cached_property
    def plane(self):
        """The PlaneRotation of X_J (per-joint products built once), or None."""
        return None if self.k is None else PlaneRotation(self)

    def parent_axis(self):
        """X_T⁻¹ S_i: the joint's (constant) motion axis in parent coordinates, numeric, for a
        plane-rotation joint (X_J leaves its own axis unchanged); None for other joints."""
        if self.k is None:
            return None
        w = np.asarray(self.axis, float)
        return np.concatenate([self.E_T.T @ w, self.E_T.T @ np.cross(self.r_J, w)])


def body_inertia(body, o):
    """H_i (6x6 numeric) about the body's origin moved by ``o`` (body coordinates)."""
    c = cross_matrix(clean(body.com - o, 1e-12))
    return np.block([[body.inertia - body.mass * c @ c, body.mass * c],
                     [-body.mass * c, body.mass * np.eye(3)]])


def body_rigid_inertia(body, o):
    """body_inertia as (m, h = m c, Ī about the origin)."""
    H = body_inertia(body, o)
    return RigidInertia(body.mass, [H[2, 4], H[0, 5], H[1, 3]], H[:3, :3])


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
            E_T = b.rotation
            out.append(LocalTransform(Transform(ca.mtimes(E, sx(E_T)), r), k, c, t,
                                      E_T, clean(E_T @ r, 1e-12), o[i], axis))
        else:
            X = joint_transform(b, q)
            # a free body's offset turns with its joint; the others' lie along S_i
            shift = ca.mtimes(X.E.T, sx(o[i])) - sx(b.rotation.T @ o[i]) if j.kind == "free" else 0
            out.append(LocalTransform(Transform(X.E, X.r + sx(r - b.translation).reshape((3, 1)) + shift),
                                      o=o[i], axis=axis))
    return out


def slid_transforms(robot, constraints, q, move_free=True):
    """``local_transforms`` in the frames ``choose_offsets`` slides along the joint axes
    (constrained bodies keep theirs; free bodies too unless ``move_free``)."""
    return local_transforms(robot, q, choose_offsets(robot, constraints, move_free=move_free))


def relative_transform(robot, T, a, b):
    """^aX_b (a spatial.Transform) between bodies a and b for T = local_transforms(...), composed
    along the tree path through their closest common ancestor c: ^aX_c (^bX_c)⁻¹.  The frames of
    the bodies between a, b and c may be slid (offsets cancel); a's and b's are those of T."""
    path_a, path_b = robot.ancestors(a), robot.ancestors(b)
    common = next(i for i in path_a if i in path_b) if set(path_a) & set(path_b) else -1

    def up_to_common(i):
        X = None
        while i != common:
            X = T[i].X if X is None else X @ T[i].X
            i = robot.parent(i)
        return X
    Xa, Xb = up_to_common(a), up_to_common(b)
    if Xb is None:
        return Xa
    return Xb.inverse() if Xa is None else Xa @ Xb.inverse()


# -- the plane rotation X_J ------------------------------------------------------------------------


class PlaneRotation:
    """X_J for a rotation about e_k; t², c t, cos 2θ, sin 2θ computed once per joint.
    Uses c² + t² = 1 (a revolute angle, or a unit (cos, sin) pair as Pinocchio requires).

    ``sg = +1`` applies E_J from the right of a row (Eᵀ on forces, Eᵀ H E on inertias),
    ``sg = -1`` its transpose (E on motions, E W Eᵀ on inverse inertias)."""

    def __init__(self, T):
        self.k, self.c, self.t = T.k, T.c, T.t
        self.i, self.j = (T.k + 1) % 3, (T.k + 2) % 3
        self.ss, self.cs = self.t * self.t, self.c * self.t
        self.S2, self.C2 = 2 * self.cs, self.c * self.c - self.ss      # ±sin 2θ, cos 2θ

    def vec(self, x, y, sg=1):
        """(x, y) E for sg = 1; E (x, y)ᵀ for sg = -1."""
        return pm(x * self.c, -sg, y * self.t), pm(y * self.c, sg, x * self.t)

    def sym2(self, a, b, d, sg=1):
        """Eᵀ [[a, b], [b, d]] E → (a', b', d'): 9 operations, the trace kept."""
        e = a - d
        delta = pm(self.ss * e, sg, self.S2 * b)
        return a - delta, pm(self.C2 * b, sg, self.cs * e), d + delta

    def gen2(self, p, q, r, w, sg=1):
        """Eᵀ [[p, q], [r, w]] E → (p', q', r', w') for a general 2x2 block: 12 operations."""
        e, u = p - w, q + r
        delta = pm(self.ss * e, sg, self.cs * u)
        n = pm(self.ss * u, -sg, self.cs * e)
        return p - delta, q - n, r - n, w + delta

    def vec6(self, v, sg=1):
        """Both 3-blocks of a 6-vector turned in the plane."""
        out = list(v)
        for p in (0, 3):
            out[p + self.i], out[p + self.j] = self.vec(v[p + self.i], v[p + self.j], sg)
        return out

    def sym6(self, H, sg=1):
        """X_Jᵀ H X_J (sg = 1) or X_J H X_Jᵀ (sg = -1) for symmetric 6x6 H: plane pairs
        (i, j) and (3+i, 3+j), fixed k and 3+k."""
        i, j, k = self.i, self.j, self.k
        out = {}
        for f in (k, 3 + k):
            for g in (k, 3 + k):
                if f <= g:
                    out[(f, g)] = H[f, g]
            for p in (0, 3):
                for idx, v in zip((p + i, p + j), self.vec(H[f, p + i], H[f, p + j], sg)):
                    out[(min(f, idx), max(f, idx))] = v
        for p in (0, 3):
            out[(p + i, p + i)], out[(p + i, p + j)], out[(p + j, p + j)] = \
                self.sym2(H[p + i, p + i], H[p + i, p + j], H[p + j, p + j], sg)
        out[(i, 3 + i)], out[(i, 3 + j)], out[(j, 3 + i)], out[(j, 3 + j)] = \
            self.gen2(H[i, 3 + i], H[i, 3 + j], H[j, 3 + i], H[j, 3 + j], sg)
        return symmetric(out, 6)


# -- numeric parts: coefficients, rotations by E_T, shifts by r ------------------------------------


def _column(m):
    return ca.vertcat(*[sx(e) for e in m])


def _entries(M):
    return [M[a] for a in range(M.shape[0])]


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
                out[(a, b)] = lin([(E[c1, ia] * E[c2, ib], H[pa + c1, pb + c2])])
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


def _swap(W):
    """P W P with P = [[0, 1], [1, 0]]: angular and linear blocks exchanged."""
    return symmetric({(a, b): W[(a + 3) % 6, (b + 3) % 6] for a in range(6) for b in range(a, 6)}, 6)


def translate_motion(W, r):
    """T(r) W T(r)ᵀ for a symmetric motion-type W (an inverse inertia): by duality
    P T(r) P = T(−r)ᵀ, it is P translate(P W P, −r) P."""
    if not isinstance(r, ca.SX) and not np.any(r):
        return W
    return _swap(translate(_swap(W), -r))


# -- the transforms --------------------------------------------------------------------------------


def transform_inertia(T, H):
    """^iX_λ(i)ᵀ H ^iX_λ(i) for a symmetric 6x6 H in child coordinates: for a plane-rotation
    joint X_J, then the shift r_J and E_T; otherwise X = R(E) T(r) in one piece."""
    if T.k is None:
        return translate(rotate(H, T.X.E), T.X.r)
    return rotate(translate(T.plane.sym6(H), T.r_J), T.E_T)


def transform_rigid(T, I):
    """^iX_λ(i)ᵀ I ^iX_λ(i) for a RigidInertia (numeric mass) in child coordinates: parent
    coordinates.  h and Ī turn like a vector and a symmetric 3x3 (plane rotation, then E_T);
    the shift by r is Ī − h rᵀ − r hᵀ − m r rᵀ + (2 r·h + m r·r) 1 and h + m r."""
    h, M = [I.h[a] for a in range(3)], linalg.entries(I.I)
    if T.k is None:
        E, r = T.X.E, T.X.r
        h = [dot([E[b, a] for b in range(3)], h) for a in range(3)]                  # Eᵀ h
        EM = [[dot([E[c, a] for c in range(3)], [M[c][b] for c in range(3)]) for b in range(3)] for a in range(3)]
        M = linalg.sym(3, lambda a, b: dot(EM[a], [E[c, b] for c in range(3)]))        # Eᵀ Ī E
    else:
        P = T.plane
        i, j, k = P.i, P.j, P.k
        h[i], h[j] = P.vec(h[i], h[j])
        M = [list(row) for row in M]
        M[k][i], M[k][j] = P.vec(M[k][i], M[k][j])
        M[i][k], M[j][k] = M[k][i], M[k][j]
        M[i][i], M[i][j], M[j][j] = P.sym2(M[i][i], M[i][j], M[j][j])
        M[j][i] = M[i][j]
        r = T.r_J
    m = float(I.mass) if I.mass.is_constant() else I.mass
    if isinstance(r, ca.SX) or np.any(r):
        if isinstance(r, ca.SX) or not isinstance(m, float):
            rl = [r[a] for a in range(3)]
            rh = dot(rl, h)
            M = linalg.sym(3, lambda a, b: M[a][b] - h[a] * rl[b] - rl[a] * h[b] - m * rl[a] * rl[b]
                           + ((2 * rh + m * dot(rl, rl)) if a == b else 0))
            h = [h[a] + m * rl[a] for a in range(3)]
        else:
            rr = float(r @ r)
            M = linalg.sym(3, lambda a, b: lin(
                [(1, M[a][b]), (m * (rr - r[a] ** 2), 1.0)] + [(2 * r[c], h[c]) for c in range(3) if c != a]
                if a == b else [(1, M[a][b]), (-r[b], h[a]), (-r[a], h[b]), (-m * r[a] * r[b], 1.0)]))
            h = [lin([(1, h[a]), (m * r[a], 1.0)]) for a in range(3)]
    if T.k is not None and not np.array_equal(T.E_T, np.eye(3)):
        E = T.E_T
        h = mat_vec(E, h, transpose=True)
        EM = [mat_vec(E, [M[c][b] for c in range(3)], transpose=True) for b in range(3)]    # columns of Eᵀ Ī
        M = linalg.sym(3, lambda a, b: lin([(E[c, b], EM[c][a]) for c in range(3)]))
    return RigidInertia(I.mass, ca.vertcat(*[sx(e) for e in h]), linalg.to_sx_rows(M))


def transform_compliance(T, W):
    """^iX_λ(i) W ^iX_λ(i)ᵀ for a symmetric motion-type 6x6 W (an inverse inertia) in parent
    coordinates: child coordinates."""
    if T.k is None:
        return rotate(translate_motion(W, T.X.r), T.X.E.T)
    return T.plane.sym6(translate_motion(rotate(W, T.E_T.T), T.r_J), -1)


def rotate_vector(T, w):
    """E w for a 3-list w in parent axes: the same vector in body axes (the rotation of
    ^iX_λ(i))."""
    if T.k is None:
        return _entries(ca.mtimes(T.X.E, _column(w)))
    P, x = T.plane, mat_vec(T.E_T, w)
    x[P.i], x[P.j] = P.vec(x[P.i], x[P.j], -1)
    return x


def transform_motion(T, m):
    """^iX_λ(i) m for a motion 6-list in parent coordinates: child coordinates."""
    if T.k is None:
        return _entries(T.X.apply_motion(_column(m)))
    w, v = mat_vec(T.E_T, m[:3]), mat_vec(T.E_T, m[3:])
    return T.plane.vec6(w + add_cross(v, T.r_J, w, -1), -1)       # [w; v − r × w]


def transform_force(T, f):
    """^iX_λ(i)ᵀ f for a force 6-list (or a row acting on motions) in child coordinates:
    parent coordinates."""
    if T.k is None:
        return _entries(T.X.transpose_force(_column(f)))
    f = T.plane.vec6(f)
    n, f_lin = add_cross(f[:3], T.r_J, f[3:]), f[3:]                # [n + r × f; f]
    return mat_vec(T.E_T, n, transpose=True) + mat_vec(T.E_T, f_lin, transpose=True)


def transform_rows(T, K):
    """K ^iX_λ(i) for constraint rows K (m x 6) acting on the child's motion."""
    if T.k is None:
        return T.X.transpose_rows(K)
    K = ca.SX(K)
    return ca.vertcat(*[ca.horzcat(*[sx(e) for e in transform_force(T, [K[r, c] for c in range(6)])])
                        for r in range(K.shape[0])])


# -- choosing the frames ----------------------------------------------------------------------


def choose_offsets(robot, constraints, passes=2, move_free=True):
    """Per-body origin offsets o_i (body coordinates) that zero components of the joint shifts
    r_J; constrained bodies keep their frames (their K_i stay as given), and so do free
    bodies unless ``move_free``.  No offset is longer than twice the model's longest joint
    offset."""
    n = robot.n_bodies
    o = np.zeros((n, 3))
    rows = np.zeros(n)
    fixed = np.array([not move_free and b.joint.kind == "free" for b in robot.bodies])
    for c in constraints.constraints:
        fixed[[c.body, *c.bodies]] = True        # K_i, and a joint's v entries, refer to model frames
        for i in c.bodies:
            while i >= 0:
                rows[i] += c.rows
                i = robot.parent(i)
    weight = [0.0 if b.joint.kind == "free" else 26.0 + 4.5 * rows[i] for i, b in enumerate(robot.bodies)]
    # offsets stay within the model's own scale: a frame moved far away (dividing by a small
    # axis component) would zero a component at the price of lever arms that lose precision
    limit = 2 * max(float(np.linalg.norm(b.translation)) for b in robot.bodies)
    kids = [robot.children(i) for i in range(n)]
    E_T = [b.rotation for b in robot.bodies]

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
                cands = {t for t in cands if np.linalg.norm(o[i] - d * (o[i] @ d) + t * d) <= limit}
                best, start = None, o[i] - d * (o[i] @ d)
                for t in sorted(cands):
                    o[i] = start + t * d
                    cst = cost(i)
                    if best is None or cst < best[0] - 1e-9:
                        best = (cst, t)
                o[i] = start + best[1] * d
    return o
