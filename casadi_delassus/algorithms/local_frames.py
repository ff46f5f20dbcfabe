"""Local-frame spatial algebra on plain lists of SX scalars, for the recursive Delassus
algorithms (efpa, kjr, ltl_osim).

A 6-vector is a list of 6 scalars ([angular; linear], Featherstone), a 6x6 matrix a list of
6 rows; symmetric matrices share each off-diagonal scalar between (a, b) and (b, a), so it is
computed once.  Entries may be exact numeric zeros: CasADi folds 0*x and x+0, so structural
zeros cost nothing.

``LocalX`` is ^iX_λ(i) = X_J(q) X_T kept as rotation E (λ -> i coords) after translation r
(i's origin in λ coords).  When the joint rotates about a coordinate axis k of an
unrotated joint frame (E_T = 1, the common case), E is a plane rotation (c, s) in the (i, j)
plane of k: a rotated 3-vector costs 4 mul + 2 add, a rotated symmetric 2x2 block 9 ops
(double-angle form: the trace is invariant), k components pass through free.  It also
offers the ``spatial.Transform`` interface (E, r, apply_motion, transpose_force,
transpose_rows), so ``kinematics`` sweeps accept it."""
from __future__ import annotations

import casadi as ca
import numpy as np

from .kinematics import joint_transform


def is_zero(e):
    if isinstance(e, ca.SX):
        return e.is_zero()
    return e == 0


def pm(x, sign, y):
    """x + y for sign > 0, x - y otherwise (CasADi folds a zero operand)."""
    return x + y if sign > 0 else x - y


def dot(a, b):
    """Σ a_l b_l skipping structural zeros (0 when none survive)."""
    acc = 0
    for x, y in zip(a, b):
        if not (is_zero(x) or is_zero(y)):
            acc = x * y if is_zero(acc) else acc + x * y
    return acc


class Shared:
    """Hash-consed products and differences: an operation on the same operands is built
    once, so equal quantities reached twice (e.g. a torque component that a joint about
    the same axis passes through unchanged) are not recomputed even without CasADi's cse."""

    def __init__(self):
        self.cache = {}

    @staticmethod
    def _key(x):
        if not isinstance(x, ca.SX):
            return float(x)
        return float(x) if x.is_constant() else x.element_hash()

    def _get(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def mul(self, x, y):
        a, b = sorted((self._key(x), self._key(y)), key=repr)
        return self._get(("*", a, b), lambda: x * y)

    def sub(self, x, y):
        return self._get(("-", self._key(x), self._key(y)), lambda: x - y)

    def dot(self, a, b):
        acc = 0
        for x, y in zip(a, b):
            if not (is_zero(x) or is_zero(y)):
                p = self.mul(x, y)
                acc = p if is_zero(acc) else self._get(("+", self._key(acc), self._key(p)), lambda: acc + p)
        return acc


def kind(e):
    """0: exact zero, 1: numeric constant, 2: symbolic."""
    if is_zero(e):
        return 0
    return 1 if not isinstance(e, ca.SX) or e.is_constant() else 2


def gram_cost(A, B, upper=True):
    """Operations to form the entries of A Bᵀ (rows of A against rows of B; the upper ones
    only when ``upper``), zeros skipped: a product costs one multiplication unless both
    factors are numbers.  Used to pick the cheaper of two equal formulas."""
    ka, kb = [[kind(e) for e in row] for row in A], [[kind(e) for e in row] for row in B]
    cost = 0
    for r in range(len(A)):
        for s in range(r if upper else 0, len(B)):
            pairs = [x * y for x, y in zip(ka[r], kb[s]) if x and y]
            n_sym = sum(p > 1 for p in pairs)
            terms = n_sym + (len(pairs) > n_sym)
            cost += n_sym + max(0, terms - 1)
    return cost


def cross(r, v):
    return [r[1] * v[2] - r[2] * v[1], r[2] * v[0] - r[0] * v[2], r[0] * v[1] - r[1] * v[0]]


def skew(r):
    return [[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]]


def matmul(A, B):
    return [[dot(row, [B[c][b] for c in range(len(B))]) for b in range(len(B[0]))] for row in A]


def sym(n, entry):
    """n x n symmetric list-matrix from entry(a, b), evaluated for a <= b only."""
    M = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a, n):
            M[a][b] = M[b][a] = entry(a, b)
    return M


def blocks(H):
    """(A, B, C) 3x3 blocks of a 6x6 [[A, B], [Bᵀ, C]]."""
    return ([row[:3] for row in H[:3]], [row[3:] for row in H[:3]], [row[3:] for row in H[3:]])


def from_blocks(A, B, C):
    return sym(6, lambda a, b: A[a][b] if b < 3 else B[a][b - 3] if a < 3 else C[a - 3][b - 3])


def to_sx(M):
    return ca.vertcat(*[ca.horzcat(*[ca.SX(e) if not isinstance(e, ca.SX) else e for e in row]) for row in M])


class LocalX:
    """^iX_λ(i)(q) for body ``body`` (see module docstring)."""

    def __init__(self, body, q):
        j, E_T = body.joint, np.asarray(body.rotation)
        self.plane = None
        if j.kind in ("revolute", "continuous") and np.array_equal(E_T, np.eye(3)):
            k = int(np.argmax(np.abs(j.axis)))
            if abs(j.axis[k]) == 1.0:
                c, s = (ca.cos(q[body.q_index]), ca.sin(q[body.q_index])) if j.kind == "revolute" \
                    else (q[body.q_index], q[body.q_index + 1])
                self.plane = (k, c, s, 1.0 if j.axis[k] > 0 else -1.0)
                # per-joint double-angle products, shared by every symmetric block rotated
                self.ss, self.cs = s * s, c * s
                self.S2, self.C2 = 2 * self.cs, c * c - self.ss
                self.rl = [float(x) for x in body.translation]
                return
        T = joint_transform(body, q)
        self.Em = [[T.E[a, b] for b in range(3)] for a in range(3)]
        self.rl = [T.r[a] for a in range(3)]

    # -- rotations ---------------------------------------------------------------------
    def rot(self, v, transpose=False):
        """E v (or Eᵀ v) for a 3-list."""
        if self.plane is None:
            E = self.Em
            return [dot([E[b][a] if transpose else E[a][b] for b in range(3)], v) for a in range(3)]
        k, c, s, sg = self.plane
        t = -sg if transpose else sg
        i, j = (k + 1) % 3, (k + 2) % 3
        out = list(v)
        out[i], out[j] = pm(c * v[i], t, s * v[j]), pm(c * v[j], -t, s * v[i])
        return out

    def sym_rot(self, A, transpose=False):
        """R A Rᵀ for symmetric 3x3 A, R = E (or Eᵀ)."""
        if self.plane is None:
            E = self.Em
            R = [[E[b][a] for b in range(3)] for a in range(3)] if transpose else E
            RA = matmul(R, A)
            return sym(3, lambda a, b: dot(RA[a], R[b]))
        k, c, s, sg = self.plane
        t = -sg if transpose else sg
        i, j = (k + 1) % 3, (k + 2) % 3
        out = [[0] * 3 for _ in range(3)]
        out[k][k] = A[k][k]
        out[i][k], out[j][k] = pm(c * A[i][k], t, s * A[j][k]), pm(c * A[j][k], -t, s * A[i][k])
        out[k][i], out[k][j] = out[i][k], out[j][k]
        a, b, d = A[i][i], A[i][j], A[j][j]
        e = a - d
        delta = pm(self.ss * e, -t, self.S2 * b)        # a' = a - δ, d' = d + δ
        out[i][i], out[j][j] = a - delta, d + delta
        out[i][j] = out[j][i] = pm(self.C2 * b, -t, self.cs * e)
        return out

    def gen_rot(self, B, transpose=False):
        """R B Rᵀ for a general 3x3 B."""
        if self.plane is None:
            E = self.Em
            R = [[E[b][a] for b in range(3)] for a in range(3)] if transpose else E
            RB = matmul(R, B)
            return [[dot(RB[a], R[b]) for b in range(3)] for a in range(3)]
        k, c, s, sg = self.plane
        t = -sg if transpose else sg
        i, j = (k + 1) % 3, (k + 2) % 3
        out = [[0] * 3 for _ in range(3)]
        out[k][k] = B[k][k]
        out[i][k], out[j][k] = pm(c * B[i][k], t, s * B[j][k]), pm(c * B[j][k], -t, s * B[i][k])
        out[k][i], out[k][j] = pm(c * B[k][i], t, s * B[k][j]), pm(c * B[k][j], -t, s * B[k][i])
        # in-plane block: its antisymmetric part m = q - r is invariant, the symmetric part
        # rotates like a symmetric block
        p, qq, rr, w = B[i][i], B[i][j], B[j][i], B[j][j]
        e, u, m = p - w, qq + rr, qq - rr
        delta = pm(self.ss * e, -t, self.cs * u)
        out[i][i], out[j][j] = p - delta, w + delta
        out[i][j] = pm(0.5 * (self.C2 * u + m), -t, self.cs * e)
        out[j][i] = out[i][j] - m
        return out

    # -- spatial operations ------------------------------------------------------------
    def motion(self, m):
        """X m: motion 6-list in λ coords -> i coords."""
        w, v = m[:3], m[3:]
        return self.rot(w) + self.rot([a - b for a, b in zip(v, cross(self.rl, w))])

    def force_t(self, f):
        """Xᵀ f: force 6-list in i coords -> λ coords."""
        n, lin = self.rot(f[:3], True), self.rot(f[3:], True)
        return [a + b for a, b in zip(n, cross(self.rl, lin))] + lin

    def inertia_t(self, H):
        """Xᵀ H X for a symmetric force-type 6x6 H (inertia) in i coords: λ coords."""
        A, B, C = blocks(H)
        A, B, C = self.sym_rot(A, True), self.gen_rot(B, True), self.sym_rot(C, True)
        rx = skew(self.rl)
        B2 = [[B[a][b] + dot(rx[a], [C[c][b] for c in range(3)]) for b in range(3)] for a in range(3)]
        B2rx, Brx = matmul(B2, rx), matmul(B, rx)          # A'' = A - B''r× - (B r×)ᵀ
        A2 = sym(3, lambda a, b: A[a][b] - B2rx[a][b] - Brx[b][a])
        return from_blocks(A2, B2, C)

    def compliance(self, W):
        """X W Xᵀ for a symmetric motion-type 6x6 W (inverse inertia) in λ coords: i coords."""
        A, B, C = blocks(W)
        rx = skew(self.rl)
        B2 = [[B[a][b] + dot(A[a], [rx[c][b] for c in range(3)]) for b in range(3)] for a in range(3)]
        rxB2, rxB = matmul(rx, B2), matmul(rx, B)          # C'' = C - r×B'' - (r×B)ᵀ
        C2 = sym(3, lambda a, b: C[a][b] - rxB2[a][b] - rxB[b][a])
        return from_blocks(self.sym_rot(A), self.gen_rot(B2), self.sym_rot(C2))

    # -- spatial.Transform interface (SX matrices), for the kinematics sweeps -----------
    @property
    def E(self):
        if not hasattr(self, "_E"):                 # built once: no duplicate nodes
            self._E = to_sx([self.rot(col) for col in np.eye(3).tolist()]).T
        return self._E

    def _columns(self, M, fn):
        M = ca.SX(M)
        return ca.horzcat(*[ca.vertcat(*fn([M[a, c] for a in range(6)])) for c in range(M.shape[1])])

    def apply_motion(self, m):
        return self._columns(m, self.motion)

    def transpose_force(self, f):
        return self._columns(f, self.force_t)

    def transpose_rows(self, K):
        return self.transpose_force(ca.SX(K).T).T

    @property
    def r(self):
        if not hasattr(self, "_r"):
            self._r = ca.vertcat(*[ca.SX(x) if not isinstance(x, ca.SX) else x for x in self.rl])
        return self._r


def transforms(robot, q):
    return [LocalX(b, q) for b in robot.bodies]
