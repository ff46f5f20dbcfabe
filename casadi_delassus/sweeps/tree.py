"""Shared sweeps of the dynamics solvers (aba, rnea, pv, pv_soft, pv_early, ltl, ltl_soft).

PV paper ../shared/papers/004_52dd6d88d839fc14.txt, Alg. 1: the first forward sweep (lines 1-5:
joint transforms, link velocities v_i (eq. 10), bias accelerations a_b,i = v_i × S_i q̇_i
(eq. 11), bias forces v_i ×* H_i v_i (eq. 23)), the force recursion of the backward sweep
(eq. 42b, line 8), the roll-out (lines 16-17), the recursive Newton-Euler passes (``newton_euler``:
rnea, ltl, ltl_soft), well-conditioned constraint rows (``Tree.orthonormalize``: pv, ltl), the
soft constraints' terms (pv_soft, ltl_soft), and the check for redundant constraints at the
trace-time probe (``check_regular``, symbolic/probe.py).  The hard
solvers' base solve is linalg.saddle_solve.  Everything is in
local link frames (frames.local_transforms, bodies slid along their joint axes by
frames.choose_offsets, which changes neither S_i nor any joint-space quantity), Featherstone's
[angular; linear] order.

Conventions shared by the solvers
- 6-vectors are lists of six SX scalars, exact numeric zeros kept as 0.0 so that they cost
  nothing (symbolic/scalar.py's arithmetic skips them).
- Forces use Featherstone's bias-force sign, p = v ×* H v − f_ext, so the paper's force terms
  are f^A = −p^A: the backward sweep passes p^a_i = p^A_i + H^a_i c_i + Ū_i u_i to the parent
  (the paper's P_i(f_i^A − H_i^A a_b,i) with the joint force folded in, eq. (24)), where
  u_i = τ_i − S_iᵀ p^A_i and Ū_i = U_i D_i⁻¹.  No negation is needed anywhere.
- Gravity enters as the acceleration a_0 = −a_grav of the world (Sec. III-B2): every link
  acceleration computed is a'_i = a_i − a_grav,i, and a constraint K_i a_i = k_i becomes
  K_i a'_i = k_i − K_i a_grav,i.  a_grav,i = [0; g_i] only needs g_i (gravity in link-i axes)
  on the paths from the roots to the constrained links: a 3-vector rotation per joint.
- The free base's velocity coordinates are Pinocchio's ([linear; angular] of the base frame
  at the joint origin); its body frame may be slid by o (frames.choose_offsets), so its
  velocity, joint force and acceleration are converted at this boundary, once.  A free joint
  with MuJoCo velocities (model/robot.py, ``Joint.velocity``: ṗ in the parent frame) is turned
  into those coordinates first, once, by the solvers' entry and exit (``local_inputs``,
  ``user_vdot``; rnea: ``local_acceleration``, ``user_forces``).
- Joints of several DoFs (free, ball) keep D_i as LDLᵀ factors (articulated.py); a ball joint's
  steps are ``joint_backward_multi`` / ``joint_forward_multi``.  Where D_i carries armature the
  joint has no structural zero along S_i (``axis_g`` reads the articulated joint's axis, None
  then).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..errors import ConstraintError, DelassusError
from ..symbolic.scalar import add, column, cross, cross_num, dot, lin, mat_vec, mul, neg, sub, sym_vec, vadd, vsub
from ..symbolic.probe import SINGULAR_PIVOT
from ..symbolic.spatial import symmetric
from .articulated import unit_axis
from ..symbolic.frames import (choose_offsets, local_transforms, rotate_vector, transform_force,
                               transform_motion, world_rotations)


def cross_axis(x, a, s, qd):
    """(s qd) (x × e_a) for a 3-list x: two products, the sign folded into the order."""
    i, j = (a + 1) % 3, (a + 2) % 3
    out = [0.0, 0.0, 0.0]
    # x × e_a = x_j e_i − x_i e_j  (e_i × e_a = e_j ... for (a, i, j) cyclic)
    hi, hj = mul(qd, x[j]), mul(qd, x[i])
    if s > 0:
        out[i], out[j] = hi, neg(hj)
    else:
        out[i], out[j] = neg(hi), hj
    return out


# -- the tree -----------------------------------------------------------------------------------
class Tree:
    """One robot and constraint set at one symbolic q: local frames,
    motion subspaces, the constraint rows of every body.  Shared by every solver."""

    def __init__(self, robot, constraints, q, K_bodies=(), offsets=None, gravity=True):
        self.robot, self.cs, self.q = robot, constraints, q
        self.with_gravity = gravity         # False: the sweeps solve with the KKT matrix alone (no g terms)
        for i, b in enumerate(robot.bodies):
            if b.joint.kind == "free" and b.parent >= 0:
                raise DelassusError(f"body {b.name!r}: a free joint below the root is not supported "
                                    f"by the dynamics solvers")
        self.offsets = choose_offsets(robot, constraints) if offsets is None else offsets
        self.T = local_transforms(robot, q, self.offsets)
        self.S = [b.joint.motion_subspace() for b in robot.bodies]
        self.axis = [unit_axis(S) for S in self.S]
        self.n = robot.n_bodies
        self.parent = [b.parent for b in robot.bodies]
        self.children = [[] for _ in robot.bodies]
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.children[p].append(i)
        # constraint rows per body: [(global row indices, K_i (SX m_i x 6))], in order
        self.own = [[] for _ in robot.bodies]
        for c, K, r0 in zip(getattr(constraints, "constraints", []), K_bodies, getattr(constraints, "offsets", [])):
            self.own[c.body].append((list(range(r0, r0 + c.rows)), K if isinstance(K, ca.SX) else ca.SX(K)))
        self.factors = {}                       # first row -> RowFactor (``orthonormalize``)
        self.constrained = [bool(o) for o in self.own]
        self.supports = [False] * self.n        # body on a path from a root to a constrained body
        for i in reversed(range(self.n)):
            if self.constrained[i] or any(self.supports[c] for c in self.children[i]):
                self.supports[i] = True

    def rows(self):
        """K_i of every constraint, in constraint order (orthonormalized by ``orthonormalize``)."""
        first = {rows[0]: K for own in self.own for rows, K in own}
        return [first[r0] for _, r0 in zip(self.cs.constraints, self.cs.offsets)]

    def is_free(self, i):
        return self.robot.bodies[i].joint.kind == "free"

    def vslice(self, x, i):
        b = self.robot.bodies[i]
        return [x[b.v_index + j] for j in range(b.joint.nv)]

    # -- first forward sweep ----------------------------------------------------------------
    def velocities(self, v):
        """(v_i, c_i = a_b,i, q̇_i) per body (PV Alg. 1 lines 3-4)."""
        vel, c, qd = [None] * self.n, [None] * self.n, [None] * self.n
        for i in range(self.n):
            qd[i] = self.vslice(v, i)
            p = self.parent[i]
            if self.is_free(i):
                lin_, w = qd[i][:3], qd[i][3:]
                vel[i] = w + vadd(lin_, cross(w, list(self.T[i].o)))    # v + ω × o
                c[i] = [0.0] * 6
                continue
            a, s = self.axis[i]
            if a is not None:
                vJ = [0.0] * 6
                vJ[a] = qd[i][0] if s > 0 else -qd[i][0]
            else:
                vJ = mat_vec(self.S[i], qd[i])
            if p < 0:
                vel[i], c[i] = vJ, [0.0] * 6                           # vJ × vJ = 0
                continue
            vel[i] = vadd(transform_motion(self.T[i], vel[p]), vJ)
            if a is not None:
                ax = a if a < 3 else a - 3
                w, lv = vel[i][:3], vel[i][3:]
                if a < 3:                                            # [ω; v] × [e_a; 0]
                    c[i] = cross_axis(w, ax, s, qd[i][0]) + cross_axis(lv, ax, s, qd[i][0])
                else:                                                # [ω; v] × [0; e_a]
                    c[i] = [0.0] * 3 + cross_axis(w, ax, s, qd[i][0])
            else:
                w, lv = vel[i][:3], vel[i][3:]
                c[i] = vadd(cross(w, vJ[:3]) + cross(w, vJ[3:]), [0.0] * 3 + cross(lv, vJ[:3]))
        return vel, c, qd

    def bias_forces(self, vel):
        """p_i = v_i ×* H_i v_i (Featherstone's sign; the paper's f_i = −p_i, eq. 23), written
        about the centre of mass c (body coordinates): with v_c = v − c × ω the velocity of the
        centre of mass, p = [ω × Ī_c ω + c × p_f; p_f], p_f = m ω × v_c (Jacobi identity:
        ω × (c × v_c) + (c × ω) × v_c = c × (ω × v_c)).  About 60 operations instead of 72."""
        out = []
        for i, b in enumerate(self.robot.bodies):
            w, lv = vel[i][:3], vel[i][3:]
            com = np.asarray(b.com, float) - self.T[i].o
            com[np.abs(com) < 1e-12] = 0.0
            vc = vsub(lv, cross_num(com, w))
            pf = [mul(float(b.mass), x) for x in cross(w, vc)]
            pn = vadd(cross(w, mat_vec(np.asarray(b.inertia, float), w)), cross_num(com, pf))
            out.append(pn + pf)
        return out

    def gravity(self, bodies=None):
        """g_i (3-list, gravity in body-i axes) on the paths to ``bodies`` (default: the
        constrained links), roots included; None elsewhere."""
        need = [False] * self.n
        for i in (range(self.n) if bodies is None else bodies):
            if bodies is None and not self.constrained[i]:
                continue
            while i >= 0 and not need[i]:
                need[i] = True
                i = self.parent[i]
        for i in range(self.n):
            if self.parent[i] < 0:
                need[i] = True
        g = [None] * self.n
        g0 = [float(x) for x in self.robot.gravity]
        for i in range(self.n):
            if need[i]:
                p = self.parent[i]
                g[i] = rotate_vector(self.T[i], g0 if p < 0 else g[p]) if self.with_gravity else [0.0] * 3
        return g

    def targets(self, k, g, negate=False):
        """l_i = K_i a_grav,i − k_i for each body's own rows (the paper's l_i = −k_i of Alg. 1
        line 5 with the gravity update of Sec. III-B2), or −l_i = k_i − K_i a_grav,i with
        ``negate``: [(rows, K_i, list)] per body (rows orthonormalized: K_i = Q_i, k_i = T_i⁻¹ k_i)."""
        out = [[] for _ in range(self.n)]
        for i in range(self.n):
            for rows, K in self.own[i]:
                ki = [k[r] for r in rows]
                if rows[0] in self.factors:
                    ki = self.factors[rows[0]].solve(ki)
                kg = [dot([K[r, 3 + j] for j in range(3)], g[i]) for r in range(len(rows))]
                lv = [sub(ki[r], kg[r]) if negate else sub(kg[r], ki[r]) for r in range(len(rows))]
                out[i].append((rows, K, lv))
        return out

    # -- well-conditioned constraint rows -------------------------------------------------------
    def orthonormalize(self):
        """Each constraint's rows K_i = T_i Q_i (T_i lower triangular, Q_i orthonormal rows):
        the solvers then enforce Q_i a_i = T_i⁻¹ k_i, and ``multipliers`` maps their μ_i back to
        λ_i = T_i⁻ᵀ μ_i.  The Delassus system of the rows Q keeps the mechanism's condition
        number instead of one multiplied by up to cond(K_i)², which costs digits of
        J v̇ + J̇ v − k.  Numeric K_i are factorized by numpy at trace time (nothing to do for
        orthonormal rows: welds, points); runtime K_i by modified Gram-Schmidt on the rows."""
        for i in range(self.n):
            for j, (rows, K) in enumerate(self.own[i]):
                fac = RowFactor.of(K)
                if fac is not None:
                    fac.rows = slice(rows[0], rows[-1] + 1)
                    self.own[i][j] = (rows, fac.Q)
                    self.factors[rows[0]] = fac

    def multipliers(self, mu):
        """λ from the multipliers μ of the orthonormalized rows (a list over all rows)."""
        lam = list(mu)
        for fac in self.factors.values():
            lam[fac.rows.start:fac.rows.stop] = fac.back(lam[fac.rows.start:fac.rows.stop])
        return lam

    # -- free base boundary -------------------------------------------------------------------
    def base_wrench(self, i, tau_b, g_b=None):
        """The free joint's τ = [f; n] (Pinocchio) as a force [n − o × f; f] in the slid frame.
        With gravity g_b (body axes) for the articulated-body solvers, whose a'_b = a_b − a_grav
        makes the base's q̈' differ from the true q̈ by [g_b; 0]: armature A on the base's linear
        DoFs (then not slid, o = 0) adds A q̈ = A q̈' + A g_b, so f − A g_b acts with q̈'."""
        arm = self.robot.armature[self.robot.bodies[i].v_index:][:3]
        if g_b is not None and np.any(arm):
            tau_b = vsub(tau_b[:3], [mul(float(a), x) for a, x in zip(arm, g_b)]) + list(tau_b[3:])
        f, n = tau_b[:3], tau_b[3:]
        return vsub(n, cross_num(self.T[i].o, f)) + list(f)

    def base_qdd(self, i, a_prime, g_b):
        """Pinocchio's base v̇ = [a_lin; α] from a'_b (slid frame, gravity removed: a = a' + [0; g])."""
        alpha, al = a_prime[:3], vadd(a_prime[3:], g_b)
        return vsub(al, cross(alpha, list(self.T[i].o))) + alpha

    def base_accel(self, i, qdd_b, g_b):
        """Inverse of base_qdd: a'_b in the slid frame from Pinocchio's base v̇."""
        al, alpha = qdd_b[:3], qdd_b[3:]
        return alpha + vsub(vadd(al, cross(alpha, list(self.T[i].o))), g_b)

    def joint_force(self, i, f):
        """S_iᵀ f for a force (or row) 6-list in body-i coordinates: a list over i's dofs.  The free
        base's dofs are taken in its slid frame, [linear; angular] ([f; n]): the joint-space
        solvers convert to Pinocchio's base coordinates once, on τ_b and v̇_b (``to_slid``,
        ``from_slid``)."""
        if self.is_free(i):
            return list(f[3:]) + list(f[:3])
        if self.S[i].shape[1] > 1:
            return mat_vec(self.S[i], f, transpose=True)
        return [self.sq(i, f)]

    # -- the joints' own velocity coordinates (MuJoCo's free joints) ---------------------------
    def _mujoco_free(self):
        return [i for i in range(self.n) if self.robot.bodies[i].joint.mujoco_velocity]

    def _linear(self, i, x, transpose=False):
        """E x (Eᵀ x) for the 3-list x: parent (world) axes to body-i axes (and back)."""
        E = self.T[i].X.E.T if transpose else self.T[i].X.E
        return _entries3(ca.mtimes(E, column(x)))

    def local_inputs(self, v, tau=None):
        """(v, τ) in local coordinates (Pinocchio's) from the joints' own: a free joint with MuJoCo
        velocities has v_lin = E ṗ and τ_lin = E f − a ω × v_lin (E: parent -> body; a: its
        linear armature, which the solvers add to D_i in local coordinates, where d/dt (E ṗ)
        has the extra Ė ṗ = −ω × v_lin).  Unchanged (the same objects) otherwise."""
        mj = self._mujoco_free()
        if not mj:
            return v, tau
        v = [v[d] for d in range(self.robot.nv)]
        tau = None if tau is None else [tau[d] for d in range(self.robot.nv)]
        for i in mj:
            k = self.robot.bodies[i].v_index
            v[k:k + 3] = self._linear(i, v[k:k + 3])
            if tau is not None:
                f = self._linear(i, tau[k:k + 3])
                arm = float(self.robot.armature[k])
                tau[k:k + 3] = vsub(f, [mul(arm, x) for x in cross(v[k + 3:k + 6], v[k:k + 3])]) if arm else f
        return v, tau

    def user_vdot(self, vdot, v):
        """v̇ in the joints' own coordinates from local v̇ and v (``local_inputs``' v): for a free
        joint with MuJoCo velocities p̈ = Eᵀ (v̇_lin + ω × v_lin)."""
        vdot = list(vdot)
        for i in self._mujoco_free():
            k = self.robot.bodies[i].v_index
            vdot[k:k + 3] = self._linear(i, vadd(vdot[k:k + 3], cross(v[k + 3:k + 6], v[k:k + 3])), True)
        return vdot

    def local_acceleration(self, a, v):
        """Inverse of ``user_vdot``: local v̇ from the joints' own (rnea's input a)."""
        mj = self._mujoco_free()
        if not mj:
            return a
        a = [a[d] for d in range(self.robot.nv)]
        for i in mj:
            k = self.robot.bodies[i].v_index
            a[k:k + 3] = vsub(self._linear(i, a[k:k + 3]), cross(v[k + 3:k + 6], v[k:k + 3]))
        return a

    def user_forces(self, tau):
        """Joint forces in the joints' own coordinates from local ones: τ_lin = Eᵀ f."""
        tau = list(tau)
        for i in self._mujoco_free():
            k = self.robot.bodies[i].v_index
            tau[k:k + 3] = self._linear(i, tau[k:k + 3], True)
        return tau

    def to_slid(self, tau):
        """τ (nv) with the free bases' entries as forces about the slid origins ([f; n − o × f])."""
        out = list(tau[d] for d in range(self.robot.nv))
        for i in range(self.n):
            if self.is_free(i):
                v0 = self.robot.bodies[i].v_index
                w = self.base_wrench(i, out[v0:v0 + 6])                  # [n'; f]
                out[v0:v0 + 6] = w[3:] + w[:3]
        return out

    def from_slid(self, vdot):
        """v̇ (nv) with the free bases' entries back in Pinocchio's coordinates: a_lin − α × o."""
        out = list(vdot)
        for i in range(self.n):
            if self.is_free(i):
                v0 = self.robot.bodies[i].v_index
                al, alpha = out[v0:v0 + 3], out[v0 + 3:v0 + 6]
                out[v0:v0 + 3] = vsub(al, cross(alpha, [float(x) for x in self.T[i].o]))
        return out

    # -- joint terms ----------------------------------------------------------------------------
    def sq(self, i, x):
        """S_iᵀ x for a 1-DoF joint."""
        a, s = self.axis[i]
        if a is not None:
            return x[a] if s > 0 else neg(x[a])
        return lin([(self.S[i][r, 0], x[r]) for r in range(6)])

    def s_times(self, i, y):
        """S_i y for a 1-DoF joint (a 6-list)."""
        a, s = self.axis[i]
        if a is not None:
            out = [0.0] * 6
            out[a] = y if s > 0 else -y
            return out
        return [mul(float(self.S[i][r, 0]), y) if self.S[i][r, 0] else 0.0 for r in range(6)]


class RowFactor:
    """K = T Q for constraint rows K (m_i x 6, SX): Q orthonormal rows, T lower triangular
    (``Tree.orthonormalize``)."""

    def __init__(self, Q, T, tinv, m):
        self.Q, self.T, self.tinv, self.m = Q, T, tinv, m
        self.rows = None                      # the constraint's slice of all rows (Tree.orthonormalize)

    @classmethod
    def of(cls, K):
        """None when K's rows are already orthonormal (numeric)."""
        m = K.shape[0]
        if K.is_constant():
            Kn = np.array(ca.DM(K))
            if np.allclose(Kn @ Kn.T, np.eye(m), rtol=0, atol=1e-14):
                return None
            q, r = np.linalg.qr(Kn.T)
            T = {(a, b): float(r[b, a]) for a in range(m) for b in range(a)}
            return cls(ca.SX(q.T), T, [1.0 / float(r[a, a]) for a in range(m)], m)
        rows, T, tinv = [], {}, []                  # modified Gram-Schmidt
        for a in range(m):
            x = [K[a, c] for c in range(6)]
            for b in range(a):
                T[(a, b)] = dot(rows[b], x)
                x = vsub(x, [mul(T[(a, b)], e) for e in rows[b]])
            tinv.append(1 / ca.sqrt(dot(x, x)))
            rows.append([mul(tinv[a], e) for e in x])
        return cls(ca.vertcat(*[ca.horzcat(*r) for r in rows]), T, tinv, m)

    def solve(self, k):
        """T⁻¹ k (forward substitution)."""
        x = []
        for a in range(self.m):
            x.append(mul(self.tinv[a], sub(k[a], dot([self.T[(a, b)] for b in range(a)], x))))
        return x

    def back(self, mu):
        """T⁻ᵀ μ (back substitution)."""
        x = [0.0] * self.m
        for a in reversed(range(self.m)):
            x[a] = mul(self.tinv[a], sub(mu[a], dot([self.T[(b, a)] for b in range(a + 1, self.m)], x[a + 1:])))
        return x


def ucol(art):
    """U_i and Ū_i of a 1-DoF ArticulatedJoint as 6-lists."""
    return [art.U[r] for r in range(6)], [art.Ubar[r] for r in range(6)]


def ha_times(art, x):
    """H^a_i x (H^a's row and column along S_i are structural zeros)."""
    return sym_vec(art.Ha, x)


def axis_g(tree, i, art):
    """(a, sign, g) with g = Ū_i without the sign of S_i = ±e_a (g_a = 1 exactly, so that
    whatever is projected through the joint has an exact zero along S_i); for other 1-DoF
    joints, and those whose D_i carries armature (no exact zero then), (None, 1, Ū_i)."""
    a, s = art.axis, art.sign
    if a is None:
        return None, 1.0, [art.Ubar[r] for r in range(6)]
    return a, s, [1.0 if l == a else art.g[l] for l in range(6)]


def joint_backward(tree, i, art, pA, tau_i, c_i):
    """u_i = τ_i − S_iᵀ p^A_i and p^a_i = p^A_i + H^a_i c_i + Ū_i u_i for a 1-DoF joint
    (along S_i = ±e_a: p^a_a = ±τ_i exactly, since Ū_a = ±1 and H^a S = 0)."""
    u = sub(tau_i, tree.sq(i, pA))
    a, s, g = axis_g(tree, i, art)
    hc = ha_times(art, c_i)
    pm = add if s > 0 else sub
    pa = [pm(add(pA[l], hc[l]), mul(g[l], u)) for l in range(6)]
    if a is not None:
        pa[a] = tau_i if s > 0 else neg(tau_i)
    return u, pa


def joint_forward(tree, i, art, y, c_i, u, extra=0.0, sign=1.0):
    """Roll-out (PV Alg. 1 lines 16-17): x = y + c_i with y = ^iX_λ a'_λ,
    q̈_i = D_i⁻¹ (u_i − U_iᵀ x − sign · extra), a'_i = x + S_i q̈_i.  Returns (q̈_i, a'_i).
    For S_i = ±e_a the component a of a'_i is formed first, a'_a = ±D⁻¹(u − sign·extra) −
    Σ_{l≠a} g_l x_l (g = Ū without the sign, g_a = 1), which needs no U_a x_a product."""
    x = vadd(y, c_i)
    a, s, g = axis_g(tree, i, art)
    t = (sub if sign > 0 else add)(u, extra)
    if a is None:
        U, _ = ucol(art)
        qdd = mul(art.Dinv, sub(t, dot(U, x)))
        return qdd, vadd(x, tree.s_times(i, qdd))
    r = dot([g[l] if l != a else 0.0 for l in range(6)], x)
    dt = mul(art.Dinv, t)
    aa = sub(dt, r) if s > 0 else sub(neg(dt), r)
    qdd = sub(aa, x[a]) if s > 0 else sub(x[a], aa)
    out = list(x)
    out[a] = aa
    return qdd, out


def joint_backward_multi(art, pA, tau_i, c_i):
    """``joint_backward`` for a joint of several DoFs (τ_i a list): u_i = τ_i − S_iᵀ p^A_i,
    p^a_i = p^A_i + H^a_i c_i + U_i D_i⁻¹ u_i, exactly ±τ along the coordinates S_i selects."""
    u = [sub(t, x) for t, x in zip(tau_i, art.coords(pA))]
    y = art.solve(u)
    hc = ha_times(art, c_i)
    pa = [add(add(pA[l], hc[l]), dot(art.Ul[l], y)) for l in range(6)]
    for c, l, sg in art.units:
        pa[l] = tau_i[c] if sg > 0 else neg(tau_i[c])
    return u, pa


def joint_forward_multi(tree, i, art, y, c_i, u, extra=None):
    """``joint_forward`` for a joint of several DoFs: q̈_i = D_i⁻¹ (u_i − U_iᵀ x − extra),
    a'_i = x + S_i q̈_i with x = y + c_i.  Returns (q̈_i as a list, a'_i)."""
    x = vadd(y, c_i)
    n = len(u)
    t = [sub(u[c], dot([art.Ul[r][c] for r in range(6)], x)) for c in range(n)]
    if extra is not None:
        t = [sub(a, b) for a, b in zip(t, extra)]
    qdd = art.solve(t)
    return qdd, vadd(x, mat_vec(tree.S[i], qdd))


def root_accel(tree, i, g):
    """^iX_0 a_0 for a fixed root: the world's a_0 = −a_grav in body-i coordinates."""
    return [0.0] * 3 + [neg(x) for x in g[i]]


def newton_euler(tree, vel, c, g, qdd=None, extra_force=None):
    """The recursive Newton-Euler passes (Featherstone, RBDA Table 5.1) over the tree's local
    frames, gravity as the world's acceleration a_0 = −a_grav (PV paper Sec. III-B2):
      forward, roots first:   a'_i = ^iX_λ a'_λ + a_b,i + S_i q̈_i,  f_i = H_i a'_i + v_i ×* H_i v_i
      backward, leaves first: f_λ(i) += ^iX_λᵀ f_i
    ``qdd`` (a vector, Pinocchio layout) None: q̈ = 0; the free base's a'_b from its v̇ in Pinocchio
    coordinates.  ``extra_force(a')`` -> {i: 6-list} adds forces on bodies before the backward
    pass.  Returns (f_i after the backward pass, a'_i) per body: the joint forces are S_iᵀ f_i."""
    acc, f = [None] * tree.n, [None] * tree.n
    for i in range(tree.n):
        par = tree.parent[i]
        if tree.is_free(i):
            acc[i] = (tree.base_accel(i, tree.vslice(qdd, i), g[i]) if qdd is not None
                      else [0.0] * 3 + [neg(x) for x in g[i]])
        else:
            y = root_accel(tree, i, g) if par < 0 else transform_motion(tree.T[i], acc[par])
            acc[i] = vadd(y, c[i])
            if qdd is not None:
                ai = tree.vslice(qdd, i)
                acc[i] = vadd(acc[i], tree.s_times(i, ai[0]) if tree.axis[i][0] is not None
                              else mat_vec(tree.S[i], ai))
        f[i] = body_force(tree.robot.bodies[i], tree.T[i].o, vel[i], acc[i])    # H a + v ×* H v
    for i, e in (extra_force(acc) if extra_force else {}).items():
        f[i] = vadd(f[i], e)
    for i in reversed(range(tree.n)):
        if tree.parent[i] >= 0:
            f[tree.parent[i]] = vadd(f[tree.parent[i]], transform_force(tree.T[i], f[i]))
    return f, acc


def inverse_dynamics(tree, v, a, extra_force=None):
    """(τ as a list (nv), a'_i per body) for joint accelerations ``a`` (SX vector), v, a and τ in
    the joints' own coordinates (a free joint's MuJoCo velocities converted at this boundary,
    Tree.local_inputs), armature included: τ += armature · a; ``extra_force`` as newton_euler's."""
    v, _ = tree.local_inputs(v)
    vel, c, _ = tree.velocities(v)
    f, acc = newton_euler(tree, vel, c, tree.gravity([]), qdd=tree.local_acceleration(a, v), extra_force=extra_force)
    tau = []
    for i in range(tree.n):
        if tree.is_free(i):
            n, fl = f[i][:3], f[i][3:]                       # [n'; f] about the slid origin
            tau += list(fl) + vadd(n, cross_num(tree.T[i].o, fl))
        else:
            tau += tree.joint_force(i, f[i])
    tau = tree.user_forces(tau)
    for d in map(int, np.flatnonzero(tree.robot.armature)):
        tau[d] = tau[d] + float(tree.robot.armature[d]) * a[d]
    return tau, acc


def soft_terms(tree, R, k):
    """The soft constraints' terms (PV paper Sec. VI, eq. 52; pv_soft, ltl_soft): ({i: K_iᵀ R_i⁻¹ K_i},
    g ↦ {i: K_iᵀ R_i⁻¹ l_i}, R⁻¹ per row) for compliances R and targets k."""
    rinv = [1 / R[r] for r in range(tree.cs.m)]
    inertia, weighted = {}, {}
    for i in range(tree.n):
        ent = {}
        for rows, K in tree.own[i]:
            for r, gr in enumerate(rows):
                w = [mul(K[r, a], rinv[gr]) for a in range(6)]
                weighted.setdefault(i, []).append((gr, w))
                for a in range(6):
                    for b in range(a, 6):
                        ent[(a, b)] = add(ent.get((a, b), 0.0), mul(w[a], K[r, b]))
        if ent:
            inertia[i] = symmetric(ent, 6)

    def forces(g):                                   # p_i += K_iᵀ R_i⁻¹ l_i = −K_iᵀ R_i⁻¹ k'_i
        out = {}
        for i, own in enumerate(tree.targets(k, g, negate=True)):
            for rows, K, nl in own:
                w = dict(weighted[i])
                f = out.get(i, [0.0] * 6)
                for r, gr in enumerate(rows):
                    f = vsub(f, [mul(x, nl[r]) for x in w[gr]])
                out[i] = f
        return out
    return inertia, forces, rinv


def world_row_drift(robot, constraints, q, v):
    """K̇ v (SX column, m): the rotation-rate part of J̇ v of world-aligned rows, whose K_i turn
    with the frame (constraints.py); zero elsewhere.  The solvers enforce K_i a_i = k_i on the
    body's spatial acceleration, so they take k − K̇ v in place of k (codegen/trace.py).  The
    velocities are the solvers' own first sweep (``Tree.velocities``, in the same frames, so
    common-subexpression elimination shares them)."""
    tree = Tree(robot, constraints, q)
    vel = tree.velocities(tree.local_inputs(v)[0])[0]       # a MuJoCo free joint's v turned local first
    R = world_rotations(robot, tree.T, [c.body for c in constraints.world])
    return ca.vertcat(*[c.rotation_rate(R[c.body], vel[c.body]) if c.world else ca.SX(c.rows, 1)
                        for c in constraints.constraints])


def check_regular(probe, pivots, name, constraints):
    """ConstraintError when the Delassus solve meets a (numerically) zero pivot at the probe:
    redundant or conflicting constraints, for which the hard multipliers are not unique."""
    vals = probe(pivots) if pivots else np.ones(1)
    if np.all(np.isfinite(vals)) and vals.min() > SINGULAR_PIVOT * vals.max():
        return
    ok = vals[np.isfinite(vals)]                  # after a zero pivot the rest is inf / nan
    raise ConstraintError(
        f"{name}: the constraints {constraints.specs} are redundant or conflicting: art M⁻¹ Jᵀ is singular at a "
        f"random configuration (smallest pivot {np.abs(ok).min():.1e} against {ok.max():.1e}), so the hard "
        f"multipliers are not unique; pv_early (drops redundant rows) or pv_soft / ltl_soft (compliance R) "
        f"solve such sets")


def _entries3(M):
    return [M[a] for a in range(3)]


def body_force(body, o, vel, acc):
    """f = H a + v ×* H v about the centre of mass c (body coordinates): with v_c = v − c × ω,
    a_c = a − c × α:  f_l = m (a_c + ω × v_c),  f_n = Ī_c α + ω × Ī_c ω + c × f_l."""
    w, v = vel[:3], vel[3:]
    al, a = acc[:3], acc[3:]
    com = np.asarray(body.com, float) - o
    com[np.abs(com) < 1e-12] = 0.0
    Ic = np.asarray(body.inertia, float)
    vc = vsub(v, cross_num(com, w))
    ac = vsub(a, cross_num(com, al))
    fl = [mul(float(body.mass), x) for x in vadd(ac, cross(w, vc))]
    fn = vadd(vadd(mat_vec(Ic, al), cross(w, mat_vec(Ic, w))), cross_num(com, fl))
    return fn + fl
