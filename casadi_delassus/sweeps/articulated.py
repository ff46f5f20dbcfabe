"""The articulated-body inertia sweep H_i^A (backward, leaves first) and the joint
projections built on it, shared by every recursive algorithm (PV-OSIM family, EFPA, KJR)
and the constrained-dynamics solvers.

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, eq. (42a) and Alg. 2 lines 5-6;
PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, eqs. (7)-(8), Alg. 1 lines 7-10;
EFPA paper ../shared/papers/003_3d6496c5334b6d59.txt, eq. (10).  In local link frames:

    U_i = H_i^A S_i,  D_i = S_iᵀ U_i,  H_i^a = H_i^A − U_i D_i⁻¹ U_iᵀ,
    H_λ(i)^A += ^iX_λ(i)ᵀ H_i^a ^iX_λ(i).

``ArticulatedJoint`` also applies what crosses joint i (``^λP_i = ^iX_λᵀ (1 − U_i D_i⁻¹ S_iᵀ)``
and its transpose, ``^λΩ_i = S_i D_i⁻¹ S_iᵀ``): to forces, constraint rows, accelerations and
inverse inertias.

Loops (matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt, Alg. 4, for its damped
inverse): the sweep can also eliminate couplings a_iᵀ C_ij a_j between two bodies (a
link-to-link constraint's stiffness) through neighbour sets, and add joint rows' stiffness
to D_i (no structural zeros along S_i then).  Without them it is the plain sweep, operation
for operation.  Armature (rotor inertia, ``Robot.armature``) enters the same way: D_i =
S_iᵀ H_i^A S_i + diag(armature_i) (Featherstone, RBDA Sec. 9.4; Pinocchio's and MuJoCo's
armature), only on the joints that have some.

What keeps it cheap:
- Symmetric 6x6 matrices are dense SX whose (i, j) and (j, i) entries are one expression.
- S_i = ±e_a picks U_i as a column of H_i^A; Ū_i = U_i D_i⁻¹ is kept as g = H_i^A[a, :] D_i⁻¹
  with the sign of S_i cancelled and g_a = 1 exactly.  Whatever is projected through the
  joint is exactly zero along S_i (H^a S = 0, (1 − U D⁻¹ Sᵀ) f has no a component; CasADi
  cannot see d − d·d/d = 0), so the plane rotation about a turns 15 entries of H^a, not 21.
- Xᵀ H X goes through frames.transform_inertia (double-angle plane rotation, shift, numeric
  E_T); the numeric parts of a parent's sum (its own H_i) are added once.
- A joint of several DoFs keeps D_i as LDLᵀ factors, never an inverse: a free joint (S = a
  permutation of I₆, D_i the 6x6 H_i^A, its projected inertia exactly zero: nothing passes to
  a parent) or a ball joint (S = [1₃; 0], D_i the angular 3x3 block of H_i^A, H_i^a zero
  outside its linear 3x3 block).  The factorization may be redone in another basis of S_i
  (``rebased``): an order that puts zeros first, or a leading direction that some rows
  annihilate exactly (``leading``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import casadi as ca
import numpy as np

from ..symbolic.spatial import sx, symmetric
from ..symbolic import linalg
from ..symbolic.frames import body_inertia, transform_force, transform_inertia
from ..symbolic.scalar import add, dot, is_zero, lin, mul


@dataclass
class ArticulatedJoint:
    """Per-body results of the sweep (body coordinates, [angular; linear] order): ``art`` in the
    algorithms, ``abi`` the list of them, one per body (``J`` is the Jacobian there)."""
    HA: ca.SX              # H_i^A (6x6, symmetric)
    S: np.ndarray          # S_i (6 x n_i), numeric
    U: ca.SX               # U_i = H_i^A S_i (6 x n_i)
    D: ca.SX               # D_i = S_iᵀ H_i^A S_i (n_i x n_i)
    Dinv: ca.SX | None     # D_i⁻¹ for 1-DoF joints (one reciprocal); None for multi-DoF joints
    Ubar: ca.SX | None     # U_i D_i⁻¹ (6 x 1) for 1-DoF joints (exactly ±1 along S_i = ±e_a)
    Ha: ca.SX              # projected H_i^a = H_i^A − U_i D_i⁻¹ U_iᵀ (6x6, symmetric)
    axis: int | None       # a with S_i = sign · e_a, when S_i is a coordinate vector
    sign: float            # that sign
    ldl: tuple | None      # (L, d, d⁻¹) of D_i for a multi-DoF joint (linalg.ldl), else None
    body: object = None
    damped: bool = False   # D_i carries armature or joint-row stiffness: nothing is exactly zero along S_i
    couplings: dict = field(default_factory=dict)   # {neighbour j: S_iᵀ C_ij} at elimination (Alg. 4)
    added: dict | None = None   # what was added to D_i (upper entries, the basis S): for ``rebased``

    @property
    def free(self):
        """A 6-DoF joint: S_i spans every motion, so nothing passes it to a parent."""
        return self.S.shape[1] == 6

    @property
    def multi(self):
        """D_i is kept as LDLᵀ factors (a joint of several DoFs: free, ball)."""
        return self.ldl is not None

    # -- scalar views -------------------------------------------------------------------
    @cached_property
    def H(self):
        """H_i^A as a list of rows of scalars."""
        return linalg.entries(self.HA)

    @cached_property
    def g(self):
        """For S_i = ±e_a: Ū_i without the sign of S_i, g_a = 1 exactly (a list)."""
        a = self.axis
        return [1 if l == a else self.H[a][l] * self.Dinv for l in range(6)]

    @cached_property
    def Ul(self):
        """U_i as rows of scalars (general S_i)."""
        return linalg.entries(self.U)

    @cached_property
    def units(self):
        """(column c, coordinate l, sign s) for the columns of S_i that are s · e_l, undamped:
        what crosses the joint has an exact zero at l (empty when D_i carries more)."""
        S = self.S
        if self.damped:
            return ()
        return tuple((c, int(np.flatnonzero(S[:, c])[0]), float(S[:, c].sum())) for c in range(S.shape[1])
                     if np.count_nonzero(S[:, c]) == 1 and abs(S[:, c]).max() == 1.0)

    @cached_property
    def zero(self):
        """Coordinates along which projected forces and inertias vanish exactly: those that
        S_i selects (all six for a free joint)."""
        if self.damped:
            return ()
        if self.S.shape[1] == 6:
            return tuple(range(6))
        return tuple(l for _, l, _ in self.units)

    # -- D⁻¹ ------------------------------------------------------------------------------
    def solve(self, t):
        """D_i⁻¹ t for an n_i-list, by the factors (one reciprocal per pivot)."""
        return [t[0] * self.Dinv] if self.ldl is None else linalg.ldl_solve(self.ldl, t)

    def gram(self, V):
        """Upper entries of V D_i⁻¹ Vᵀ for rows V (m lists of n_i scalars), keyed by positions."""
        if self.ldl is None:
            w = [mul(v[0], self.Dinv) for v in V]
            return {(p, q): mul(w[p], V[q][0]) for p in range(len(V)) for q in range(p, len(V))}
        n = self.S.shape[1]
        Z = linalg.forward_substitute(self.ldl[0], n, [[v[c] for v in V] for c in range(n)])    # L⁻¹ Vᵀ
        return linalg.scaled_gram(Z, self.ldl[2], len(V))

    def coords(self, f):
        """S_iᵀ f for a 6-list (a selection for coordinate columns)."""
        return [dot(self.S[:, c], f) for c in range(self.S.shape[1])]

    # -- projections ----------------------------------------------------------------------
    def force(self, f):
        """(1 − U_i D_i⁻¹ S_iᵀ) f: what of a force (or a row acting on motions) passes the
        joint; exactly zero along S_i."""
        a = self.axis
        if a is not None:
            return [0 if l == a else f[l] - self.g[l] * f[a] for l in range(6)]
        if self.S.shape[1] == 6:
            return [0] * 6
        y = self.solve(self.coords(f))
        return [0 if l in self.zero else f[l] - dot(self.Ul[l], y) for l in range(6)]

    def project_rows(self, K):
        """(K P_iᵀ, v) for rows K (m x 6 SX): K P_iᵀ = K − (K S_i) D_i⁻¹ U_iᵀ, exactly zero in
        the columns S_i selects (undamped), and v = K S_i (m x n_i; up to the sign of S_i = ±e_a
        for one DoF: v enters only as v D_i⁻¹ vᵀ)."""
        K = ca.SX(K)
        rows = [self.force([K[r, c] for c in range(6)]) for r in range(K.shape[0])]
        Kp = ca.vertcat(*[ca.horzcat(*[sx(e) for e in row]) for row in rows])
        if self.axis is not None:
            return Kp, K[:, self.axis]
        if self.multi:
            return Kp, linalg.to_sx_rows([self.coords([K[r, c] for c in range(6)]) for r in range(K.shape[0])])
        return Kp, ca.mtimes(K, sx(self.S))

    def neg_g_dot(self, x):
        """−Σ_{l≠a} g_l x_l; the sign rides on one −g_l per joint, not one NEG per use."""
        a = self.axis
        terms = [(l, x[l]) for l in range(6) if l != a and not is_zero(self.g[l]) and not is_zero(x[l])]
        if not terms:
            return 0
        l0, x0 = terms[0]
        neg = self.__dict__.setdefault("_neg", {})
        if l0 not in neg:
            neg[l0] = -self.g[l0]
        acc = neg[l0] * x0
        for l, x_ in terms[1:]:
            acc = acc - self.g[l] * x_
        return acc

    def motion(self, m, f=None):
        """(1 − S_i D_i⁻¹ U_iᵀ) m + S_i D_i⁻¹ S_iᵀ f: an acceleration carried across the joint
        (with the joint force f, zero when None)."""
        a = self.axis
        if a is not None:
            out = list(m)
            rest = [m[l] if l != a else 0 for l in range(6)]
            if f is None or is_zero(f[a]):
                out[a] = self.neg_g_dot(rest)                       # m_a − gᵀm with g_a = 1
            else:
                out[a] = self.Dinv * (f[a] - dot(self.H[a], rest))
            return out
        n = self.S.shape[1]
        t = [dot([self.Ul[r][c] for r in range(6)], m) - (dot(self.S[:, c], f) if f is not None else 0)
             for c in range(n)]
        y = self.solve(t)
        return [m[l] - dot(self.S[l, :], y) for l in range(6)]

    def omega(self, f):
        """S_i D_i⁻¹ S_iᵀ f."""
        a = self.axis
        if a is not None:
            return [self.Dinv * f[a] if l == a else 0 for l in range(6)]
        y = self.solve(self.coords(f))
        return [dot(self.S[l, :], y) for l in range(6)]

    def omega_matrix(self):
        """S_i D_i⁻¹ S_iᵀ as a symmetric 6x6 SX."""
        cols = [self.omega([1.0 if r == c else 0.0 for r in range(6)]) for c in range(6)]
        return symmetric({(a, b): cols[b][a] for a in range(6) for b in range(a, 6)}, 6)

    def congruence(self, N):
        """(1 − S D⁻¹ Uᵀ) N (1 − U D⁻¹ Sᵀ) + S D⁻¹ Sᵀ for a symmetric motion-type N (6x6 SX):
        the inverse inertia ⁰Ω_i from N = ^iX_λ ⁰Ω_λ ^iX_λᵀ.  For S_i = ±e_a, row and column a
        of N are never read (they are replaced), the rest of N passes unchanged."""
        a = self.axis
        Nl = linalg.entries(N)
        if a is not None:
            y = [None if b == a else self.neg_g_dot([Nl[l][b] if l != a else 0 for l in range(6)])
                 for b in range(6)]
            yaa = self.Dinv - dot(self.g, [0 if b == a else y[b] for b in range(6)])
            return symmetric({(r, s): yaa if r == s == a else y[s] if r == a else y[r] if s == a else Nl[r][s]
                              for r in range(6) for s in range(r, 6)}, 6)
        n = self.S.shape[1]
        W = [self.solve([self.Ul[r][c] for c in range(n)]) for r in range(6)]     # rows of U D⁻¹
        M = [[(1.0 if r == s else 0.0) - dot(self.S[r, :], W[s]) for s in range(6)] for r in range(6)]
        MN = [[dot(M[r], [Nl[l][s] for l in range(6)]) for s in range(6)] for r in range(6)]
        Om = self.omega_matrix()
        return symmetric({(r, s): dot(MN[r], M[s]) + Om[r, s] for r in range(6) for s in range(r, 6)}, 6)

    # -- another basis of S_i ---------------------------------------------------------------
    def rebased(self, S):
        """The same joint with D_i factored in the basis ``S`` (numeric, the same column
        space as S_i): S D⁻¹ Sᵀ and every projection are unchanged (what was added to D_i,
        armature or stiffness, turned into the new basis)."""
        if not self.added:
            return project(self.body, self.HA, S)
        C = np.linalg.lstsq(self.S, S, rcond=None)[0]           # S = S_i C
        n = self.S.shape[1]
        added = {(a, b): lin([(C[c, a] * C[d, b], self.added[(min(c, d), max(c, d))])
                              for c in range(n) for d in range(n) if (min(c, d), max(c, d)) in self.added])
                 for a in range(n) for b in range(a, n)}
        return project(self.body, self.HA, S, added)

    def leading(self, twists):
        """``rebased`` with the numeric motions ``twists`` (in span S_i, independent) as the
        first columns, each in place of a column of S_i along which it has a unit (else the
        largest) coordinate: rows that annihilate a twist have an exact zero coordinate
        there, which a factorization led by those columns keeps."""
        rest = list(range(self.S.shape[1]))
        for s in twists:
            w = np.abs(self.S.T @ s)
            score = {c: (abs(w[c] - 1) < 1e-12) * 10 + w[c] for c in rest
                     if np.linalg.matrix_rank(np.column_stack(list(twists) + [self.S[:, k] for k in rest if k != c]),
                                              1e-9) == self.S.shape[1]}
            rest.remove(max(score, key=score.get))
        return self.rebased(np.column_stack(list(twists) + [self.S[:, c] for c in rest]))


def unit_axis(S):
    """(a, sign) when the single column S is sign · e_a, else (None, 1)."""
    if S.shape[1] != 1:
        return None, 1.0
    nz = np.flatnonzero(S[:, 0])
    if len(nz) == 1 and abs(S[nz[0], 0]) == 1.0:
        return int(nz[0]), float(S[nz[0], 0])
    return None, 1.0


def project(body, HA, S=None, damping=None):
    """U, D, D⁻¹, U D⁻¹ and H^a for one joint (in the basis ``S`` of its motion subspace,
    S_i by default).  ``damping`` is added to D_i: n_i scalars on its diagonal (armature;
    joint rows' 𝒦ᵀ R 𝒦 with 𝒦 = 1, matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt,
    Alg. 4 line 11), or upper entries {(a, b): e} in the basis S; H^a S_i is then no longer
    zero.  A joint of several DoFs keeps D_i as LDLᵀ factors, never an inverse; what it projects
    (H^a, and forces) is exactly zero along the coordinates its unit columns select (all six for
    a free joint: nothing passes it)."""
    S = body.joint.motion_subspace() if S is None else S
    HA = sx(HA)
    n = S.shape[1]
    added = None if damping is None else damping if isinstance(damping, dict) else \
        {(c, c): r for c, r in enumerate(damping)}
    if n > 1:
        H = linalg.entries(HA)
        U = [[dot(row, S[:, c]) for c in range(n)] for row in H]
        upper = {(a, b): dot(S[:, a], [U[r][b] for r in range(6)]) for a in range(n) for b in range(a, n)}
        for key, r in (added or {}).items():
            upper[key] = upper[key] + r
        fac = linalg.ldl(upper, n)
        art = ArticulatedJoint(HA, S, linalg.to_sx_rows(U), symmetric(upper, n), None, None,
                               ca.SX.zeros(6, 6), None, 1.0, fac, body, added is not None, added=added)
        if n < 6:                                       # H^a = H − U D⁻¹ Uᵀ, zero along S unless damped
            Z = linalg.forward_substitute(fac[0], n, [[U[r][c] for r in range(6)] for c in range(n)])
            Zs = [[mul(z, d) for z in row] for row, d in zip(Z, fac[2])]
            zero = art.zero
            art.Ha = symmetric({(p, q): 0 if p in zero or q in zero else
                                H[p][q] - dot([row[p] for row in Zs], [row[q] for row in Z])
                                for p in range(6) for q in range(p, 6)}, 6)
        return art
    a, sign = unit_axis(S)
    if a is not None and damping is None:
        U = sign * HA[:, a]                           # H^A S: a column, no products
        D = HA[a, a]
        Dinv = 1 / D
        art = ArticulatedJoint(HA, S, U, D, Dinv, None, None, a, sign, None, body)
        art.Ubar = sign * linalg.to_sx_rows([[x] for x in art.g])
        H, g = art.H, art.g
        art.Ha = symmetric({(p, q): 0 if a in (p, q) else H[p][q] - H[p][a] * g[q]     # H^a S = 0
                          for p in range(6) for q in range(p, 6)}, 6)
        return art
    H = linalg.entries(HA)
    U = [[dot(row, S[:, c]) for c in range(S.shape[1])] for row in H]
    D = dot(S[:, 0], [U[r][0] for r in range(6)])
    if added is not None:
        D = D + added[(0, 0)]
    Dinv = 1 / D
    Ubar = [u[0] * Dinv for u in U]
    ent = {(p, q): H[p][q] - U[p][0] * Ubar[q] for p in range(6) for q in range(p, 6)}
    return ArticulatedJoint(HA, S, linalg.to_sx_rows(U), D, Dinv, linalg.to_sx_rows([[x] for x in Ubar]),
                            symmetric(ent, 6), None, sign, None, body, added is not None, added=added)


def symmetric_sum(const, terms):
    """const (numeric 6x6) + Σ terms (symmetric SX, or dicts of upper entries), each entry
    summed once."""
    ent = {}
    for a in range(6):
        for b in range(a, 6):
            e = 0
            for T in terms:
                x = T.get((a, b), 0) if isinstance(T, dict) else T[a, b]
                if not is_zero(x):
                    e = x if isinstance(e, int) else e + x
            k = float(const[a, b])
            if k and isinstance(e, int):
                e = k
            elif k:                                 # e − |k| shares the constant of a +|k| entry
                e = e + k if k > 0 else e - (-k)
            ent[(a, b)] = e
    return symmetric(ent, 6)


def articulated_inertias(robot, T, extra=None, post=None, coupling=None, damping=None):
    """[ArticulatedJoint per body] for T = frames.local_transforms(robot, q[, offsets]),
    in the frames of T.  Hooks: ``extra`` ({body: [symmetric SX or upper-entry dicts]}) is
    added to the bodies' own inertias (e.g. constraint stiffness Kᵀ R K); ``post(i, art)`` runs
    when body i's joint is projected (children done) and may return a symmetric SX added to
    H^a_i before it passes to the parent; ``damping`` ({body: [n_i scalars]}) is added to D_i.

    ``coupling`` ({(i, j): C (6x6 SX)}) adds a_iᵀ C a_j between two bodies to the quadratic
    form ½ Σ a_iᵀ H_i a_i that the sweep eliminates (a link-to-link constraint's K_iᵀ R K_j):
    the loop-constrained ABA of the matrix-free paper ../shared/papers/001_a194bdf892a0cc2c.txt,
    Alg. 4 lines 13-30, eliminating leaves first (S^E = reversed body order).  Each joint keeps
    its neighbours' rows S_iᵀ C_ij in ``couplings`` for the force and acceleration sweeps
    (sweeps/matrix_free.py)."""
    const = [body_inertia(b, t.o) for b, t in zip(robot.bodies, T)]     # H_i, numeric
    terms = [list((extra or {}).get(i, ())) for i in range(robot.n_bodies)]
    damping = with_armature(robot, damping)
    pairs = {}
    for (i, j), C in (coupling or {}).items():
        _couple(pairs, i, j, C)
    out = [None] * robot.n_bodies
    for i in reversed(range(robot.n_bodies)):
        out[i] = art = project(robot.bodies[i], symmetric_sum(const[i], terms[i]), damping=(damping or {}).get(i))
        more = post(i, art) if post else None
        p = robot.parent(i)
        neighbours = {j: pairs.pop((i, j)) for j in sorted(j for k, j in list(pairs) if k == i)}
        if neighbours:
            _eliminate(art, T[i], p, neighbours, terms, pairs)
        if p < 0 or art.free:
            continue
        Ha = art.Ha if more is None else symmetric_sum(np.zeros((6, 6)), [art.Ha, more])
        terms[p].append(transform_inertia(T[i], Ha))       # H_λ(i)^A += Xᵀ H^a X
    return out


def with_armature(robot, damping):
    """``damping`` ({body: n_i scalars added to D_i}) plus the robot's armature, for the joints
    that have some (the others' D_i, and their structural zeros, stay as they are)."""
    out = dict(damping or {})
    for i, b in enumerate(robot.bodies):
        arm = robot.armature[b.v_index:b.v_index + b.joint.nv]
        if np.any(arm):
            out[i] = [add(x, float(r)) for x, r in zip(out.get(i, [0.0] * len(arm)), arm)]
    return out


def _couple(pairs, i, j, C):
    """pairs[(i, j)] += C for the term a_iᵀ C a_j, keyed with the later-eliminated body first."""
    key, C = ((i, j), C) if i > j else ((j, i), C.T)
    pairs[key] = pairs[key] + C if key in pairs else C


def _eliminate(art, T, p, neighbours, terms, pairs):
    """Alg. 4 lines 17-30 for joint i with its neighbours {j: C_ij} and parent p: with ν̇_i
    eliminated, neighbours j, k couple by −(S_iᵀ C_ij)ᵀ D_i⁻¹ (S_iᵀ C_ik) (j = k: their own
    inertias), and the parent takes ^iX_pᵀ P_i C_ij with P_i = 1 − U_i D_i⁻¹ S_iᵀ (j = p: into
    H_p^A, symmetrised)."""
    n = art.S.shape[1]
    art.couplings = rows = {j: ca.mtimes(sx(art.S).T, C) for j, C in neighbours.items()}
    solved = {j: ca.horzcat(*[ca.vertcat(*art.solve([R[r, c] for r in range(n)])) for c in range(6)])
              for j, R in rows.items()}                                       # D_i⁻¹ S_iᵀ C_ij
    order = list(neighbours)
    for x, j in enumerate(order):
        for k in order[x:]:
            G = ca.mtimes(rows[j].T, solved[k])
            if j == k:
                terms[j].append({(a, b): -G[a, b] for a in range(6) for b in range(a, 6)})
            else:
                _couple(pairs, j, k, -G)
    if p < 0:
        return
    for j, C in neighbours.items():
        cols = [transform_force(T, art.force([C[r, c] for r in range(6)])) for c in range(6)]
        M = ca.horzcat(*[ca.vertcat(*[sx(e) for e in col]) for col in cols])     # ^iX_pᵀ P_i C_ij
        if j == p:
            terms[p].append({(a, b): M[a, b] + M[b, a] for a in range(6) for b in range(a, 6)})
        else:
            _couple(pairs, p, j, M)
