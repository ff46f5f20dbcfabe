"""Jacobians of the dynamics solvers' outputs from the RNEA partials (rnea_derivatives.Partials),
chained through our own factorizations, the sparse LᵀDL of M (joint_space.MassFactor) and a
dense LDLᵀ of the Delassus matrix Λ⁻¹ = J M⁻¹ Jᵀ (Carpentier & Mansard, RSS 2018, for the
method; Pinocchio's aba-derivatives and constrained-dynamics-derivatives compute the same
quantities with a dense M⁻¹).

Unconstrained (aba): M v̇ + c(q, v) = τ, so with τ = RNEA(q, v, v̇):
    ∂v̇/∂x = −M⁻¹ ∂RNEA/∂x |_{a = v̇} (x = q, v),     ∂v̇/∂τ = M⁻¹.
Hard constraints (pv, ltl; PV paper ../shared/papers/004_52dd6d88d839fc14.txt eq. (36), in joint
space M v̇ + c = τ + Jᵀ λ, J v̇ + J̇ v = k): differentiating RNEA(q, v, v̇) − Jᵀλ = τ and
γ(q, v, v̇) = J v̇ + J̇ v = k gives, per column of the Jacobian,

    [M  −Jᵀ] [dv̇]   [dτ − ∂(RNEA − Jᵀλ)/∂x]         dλ = Λ (r₂ − J M⁻¹ r₁)
    [J   0 ] [dλ ] = [dk − ∂γ/∂x            ],  so   dv̇ = M⁻¹ (r₁ + Jᵀ dλ),

where the λ term is the RNEA with the multipliers as external forces K_iᵀ λ_i on the constrained
links, and ∂γ/∂x are those links' acceleration partials from the same forward pass.  With
M⁻¹ = L⁻¹ D⁻¹ L⁻ᵀ and Y = J L⁻¹ (as ltl.py): z = D⁻¹ L⁻ᵀ r₁, dλ = Λ (r₂ − Y z),
dv̇ = L⁻¹ (z + D⁻¹ Yᵀ dλ).  The constraint rows are the orthonormalized Q_i (Tree.orthonormalize:
K_i = T_i Q_i), so the Delassus system keeps the mechanism's conditioning; dk enters as T⁻¹ dk
and dλ leaves as T⁻ᵀ dμ (Tree.multipliers).  Signs are folded into the solves (−D⁻¹ once), so
no column is negated.

Outputs are named d<output>_d<input> (``jacobian_name``), columns in the tangent space of q
(rnea_derivatives: the model's integrate, Pinocchio's for a free joint)."""
from __future__ import annotations

import casadi as ca

from ..errors import DelassusError
from ..symbolic import linalg, passes
from ..symbolic.scalar import add, column, dot, is_zero, mul, neg, sub, vadd
from . import joint_space
from .rnea_derivatives import Partials
from .tree import Tree, inverse_dynamics


def jacobian_name(output, wrt):
    return f"d{output}_d{wrt}"


def check_wrt(algorithm, wrt, allowed):
    """``wrt`` as a tuple, or a DelassusError naming what this algorithm cannot differentiate by."""
    wrt = tuple(wrt)
    bad = [x for x in wrt if x not in allowed]
    if bad or not wrt:
        raise DelassusError(f"algorithm {algorithm!r} has no analytical derivative with respect to "
                            f"{', '.join(map(repr, bad)) or 'nothing'} (it differentiates by {', '.join(allowed)})")
    return wrt


def matrix(cols, rows):
    """An SX matrix (rows x len(cols)) from its columns (lists of scalars)."""
    if not cols:
        return ca.SX(rows, 0)
    return ca.horzcat(*[column(c) for c in cols])


def from_entries(entries, rows, cols, symmetric=False):
    """An SX matrix from {(row, col): e} (mirrored when ``symmetric``); other entries zero."""
    M = ca.SX(rows, cols)
    for (r, c), e in entries.items():
        M[r, c] = e
        if symmetric:
            M[c, r] = e
    return M


def _column(entries, j, n):
    """Column j of a matrix given as {(row, col): e}, as a list of n scalars."""
    return [entries.get((r, j), 0.0) for r in range(n)]


class Solver:
    """The sparse LᵀDL of M from the partials' M (upper entries), with −D⁻¹ kept for the
    columns −M⁻¹ X."""

    def __init__(self, robot, M):
        self.fac = joint_space.MassFactor(robot, M)
        self.neg_dinv = [neg(d) for d in self.fac.Dinv]
        passes.done("derivatives: M = Lᵀ D L (sparse)", self.fac.L, self.fac.Dinv)

    def half(self, b, sign=1.0):
        """±D⁻¹ L⁻ᵀ b."""
        fac = self.fac
        y = joint_space.solve_lt(fac.L, fac.parents, b, fac.ops)
        dinv = fac.Dinv if sign > 0 else self.neg_dinv
        return [fac.ops.mul(x, d) if not is_zero(x) else 0.0 for x, d in zip(y, dinv)]

    def finish(self, w):
        return self.fac.finish(w)

    def solve(self, b):
        return self.finish(self.half(b))


class Delassus:
    """Y = J L⁻¹ for rows J (lists over the dofs), D⁻¹ Yᵀ, and the LDLᵀ of Λ⁻¹ = Y D⁻¹ Yᵀ block
    by block (rows of independent blocks do not couple): Λ s for many s."""

    def __init__(self, solver, J):
        fac = solver.fac
        self.m = len(J)
        self.Y = [joint_space.solve_lt(fac.L, fac.parents, row, fac.ops) for row in J]
        self.YD = [[mul(e, d) if not is_zero(e) else 0.0 for e, d in zip(row, fac.Dinv)] for row in self.Y]
        A = {}
        for a in range(self.m):
            for b in range(a, self.m):
                e = dot(self.YD[a], self.Y[b])
                if not is_zero(e):
                    A[(a, b)] = e
        self.blocks = [(blk, linalg.ldl(linalg.local(A, blk), len(blk))) for blk in linalg.blocks_of(A, list(range(self.m)))]
        passes.done("derivatives: Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ = P Δ Pᵀ", self.Y, A)

    def times_z(self, z):
        """Y z."""
        return [dot(row, z) for row in self.Y]

    def solve(self, s):
        """Λ s."""
        out = [None] * self.m
        for blk, fac in self.blocks:
            for r, x in zip(blk, linalg.ldl_solve(fac, [s[r] for r in blk])):
                out[r] = x
        return out

    def constrained_inverse(self, solver, n):
        """(upper entries of M⁻¹ − V Λ Vᵀ, the columns Λ Vᵀ e_a negated, V) with V = M⁻¹ Jᵀ
        (columns L⁻¹ D⁻¹ Y_rᵀ): ∂v̇/∂τ and ∂μ/∂τ, symmetric and over common ancestors
        (MassFactor.inverse) instead of n solves.  With Λ⁻¹ = P Δ Pᵀ per block and U = V P⁻ᵀ,
        V Λ Vᵀ = U Δ⁻¹ Uᵀ and −Λ V ᵀe_a = P⁻ᵀ (−Δ⁻¹) u_a."""
        V = [solver.finish(row) for row in self.YD]
        U = [[None] * self.m for _ in range(n)]
        neg_dinv = {}
        for blk, (P, _, dinv) in self.blocks:
            for a in range(n):
                for r, u in zip(blk, linalg.forward_substitute(P, len(blk), [[V[r][a]] for r in blk])):
                    U[a][r] = u[0]
            neg_dinv.update({r: neg(d) for r, d in zip(blk, dinv)})
        dinv = {r: d for blk, (_, _, di) in self.blocks for r, d in zip(blk, di)}
        UD = [[mul(u, dinv[r]) for r, u in enumerate(row)] for row in U]
        low = {(a, b): dot(UD[a], U[b]) for a in range(n) for b in range(a, n)}
        P_ = {key: sub(e, low[key]) for key, e in solver.fac.inverse().items()}
        mu_cols = []
        for a in range(n):
            mu = [None] * self.m
            for blk, (P, _, _) in self.blocks:
                for r, x in zip(blk, linalg.back_substitute(P, len(blk), [mul(U[a][r], neg_dinv[r]) for r in blk])):
                    mu[r] = x
            mu_cols.append(mu)
        return P_, mu_cols, V

    def back(self, mu):
        """D⁻¹ Yᵀ μ (a list over the dofs)."""
        n = len(self.YD[0]) if self.YD else 0
        return [dot([row[d] for row in self.YD], mu) for d in range(n)]


# -- unconstrained: aba ------------------------------------------------------------------------------
def forward_dynamics_jacobians(tree, v, vdot, wrt):
    """{d vdot_d x: SX nv x nv} for x in ``wrt`` (q, v, tau) at the solution v̇ of M v̇ + c = τ."""
    n = tree.robot.nv
    P = Partials(tree, v, vdot)
    d = P.dtau(tuple(x for x in wrt if x in ("q", "v")))
    solver = Solver(tree.robot, d["M"])
    out = {}
    for x in wrt:
        if x == "tau":                                          # M⁻¹ over common ancestors
            out[jacobian_name("vdot", x)] = from_entries(solver.fac.inverse(), n, n, symmetric=True)
        else:                                                   # −M⁻¹ ∂τ/∂x
            out[jacobian_name("vdot", x)] = matrix([solver.finish(solver.half(_column(d[x], j, n), -1.0))
                                                    for j in range(n)], n)
        passes.done(f"derivatives: ∂v̇/∂{x}", out[jacobian_name("vdot", x)])
    return out


# -- hard constraints: pv, ltl -------------------------------------------------------------------------
def external_forces(tree, K_bodies, lam):
    """{body: Σ K_iᵀ λ_i} (body coordinates) for the constraint rows K_bodies and multipliers λ."""
    cs, out = tree.cs, {}
    for c, K, r0 in zip(cs.constraints, K_bodies, cs.offsets):
        K = K if isinstance(K, ca.SX) else ca.SX(K)
        f = [dot([K[r, col] for r in range(c.rows)], [lam[r0 + r] for r in range(c.rows)]) for col in range(6)]
        out[c.body] = vadd(out[c.body], f) if c.body in out else f
    return out


def constrained_dynamics_jacobians(tree, K_bodies, v, vdot, lam, wrt):
    """{d vdot_d x, d lam_d x} for x in ``wrt`` (q, v, tau, k) at the solution (v̇, λ) of the hard
    problem; ``tree`` orthonormalized (its own rows are Q_i), K_bodies the constraints' K_i."""
    robot, cs = tree.robot, tree.cs
    n, m = robot.nv, cs.m
    P = Partials(tree, v, vdot, external_forces(tree, K_bodies, lam))
    dx = tuple(x for x in wrt if x in ("q", "v"))
    d = P.dtau(dx)
    dg = {x: {} for x in (*dx, "J")}                 # constraint partials, rows of Q, global row ids
    for i in range(tree.n):
        for rows, K in tree.own[i]:
            part = P.constraint_partials(i, K, dx)
            for x, ent in part.items():
                for (r, j), e in ent.items():
                    dg[x][(rows[r], j)] = e
    passes.done("derivatives: ∂γ/∂q, ∂γ/∂v, J of the constrained links", dg)
    solver = Solver(robot, d["M"])
    kkt = Delassus(solver, [[dg["J"].get((r, j), 0.0) for j in range(n)] for r in range(m)])
    cols = {x: ([], []) for x in wrt}
    V = None
    if "tau" in wrt:
        P_, mu_cols, V = kkt.constrained_inverse(solver, n)
    for x in wrt:
        if x == "tau":
            out_tau = from_entries(P_, n, n, symmetric=True)
            cols[x][1].extend(tree.multipliers(mu) for mu in mu_cols)
            continue
        for j in range(n if x != "k" else m):
            if x in ("q", "v"):          # r₁ = −∂τ/∂x, r₂ = −∂γ/∂x: z = −z', dμ = Λ (Y z' − ∂γ)
                zp = solver.half(_column(d[x], j, n))
                mu = kkt.solve([sub(y, dg[x].get((r, j), 0.0)) for r, y in enumerate(kkt.times_z(zp))])
                w = [sub(b, z) for b, z in zip(kkt.back(mu), zp)]
            else:                        # r₂ = T⁻¹ e_j: dv̇ = M⁻¹ Jᵀ dμ
                mu = kkt.solve(unit_target(tree, j, m))
                cols[x][0].append([dot([col[a] for col in V], mu) for a in range(n)] if V is not None
                                  else solver.finish(kkt.back(mu)))
                cols[x][1].append(tree.multipliers(mu))
                continue
            cols[x][0].append(solver.finish(w))
            cols[x][1].append(tree.multipliers(mu))
    out = {}
    for x in wrt:
        out[jacobian_name("vdot", x)] = out_tau if x == "tau" else matrix(cols[x][0], n)
        out[jacobian_name("lam", x)] = matrix(cols[x][1], m)
        passes.done(f"derivatives: ∂v̇/∂{x}, ∂λ/∂{x}", out[jacobian_name("vdot", x)], out[jacobian_name("lam", x)])
    return out


def kkt_residual(tree, v, tau, k, vdot, lam):
    """r = [RNEA(q, v, v̇) − Jᵀ λ − τ; J v̇ + J̇ v − k] (an nv + m SX column) of the hard problem
    at a candidate solution (v̇, λ), for derivatives by the implicit-function theorem: r = 0 at
    the solution, ∂r/∂(v̇, λ) = [[M, −Jᵀ], [J, 0]] is the KKT matrix, so dy = −KKT⁻¹ ∂r/∂x dx.
    The rows are the tree's own K_i on the links' spatial accelerations a_i = a'_i + a_grav,i
    (RNEA's a'_i, gravity as the world's acceleration); λ enters as the forces −K_iᵀ λ_i."""
    pushed = {i: [neg(x) for x in f] for i, f in external_forces(tree, tree.rows(), lam).items()}
    joint, acc = inverse_dynamics(tree, v, vdot, lambda acc: pushed)
    g = tree.gravity()
    gamma = [None] * tree.cs.m
    for i, own in enumerate(tree.own):
        for rows, K in own:
            for r, x in enumerate(rows):
                gamma[x] = add(dot([K[r, c] for c in range(6)], acc[i]), dot([K[r, 3 + j] for j in range(3)], g[i]))
    return ca.vertcat(column([sub(a, tau[d]) for d, a in enumerate(joint)]),
                      column([sub(a, k[x]) for x, a in enumerate(gamma)]))


def hard_derivative(name, solve):
    """The registry's ``derivative`` of a hard constrained-dynamics solver ``solve`` (pv, ltl):
    its solution, then ``constrained_dynamics_jacobians`` on its own orthonormalized tree."""
    def derivative(robot, constraints, q, K_bodies, wrt, v, tau, k):
        wrt = check_wrt(name, wrt, ("q", "v", "tau", "k"))
        value = solve(robot, constraints, q, K_bodies, v, tau, k)
        tree = Tree(robot, constraints, q, K_bodies)
        tree.orthonormalize()
        return constrained_dynamics_jacobians(tree, K_bodies, v, value["vdot"], value["lam"], wrt)
    derivative.__doc__ = f"∂(v̇, λ)/∂(q, v, τ, k) through the KKT system at {name}'s solution."
    return derivative


def soft_derivative(name, solve):
    """The registry's ``derivative`` of a soft solver ``solve`` (pv_soft, ltl_soft)."""
    def derivative(robot, constraints, q, K_bodies, wrt, v, tau, k, R):
        wrt = check_wrt(name, wrt, ("q", "v", "tau", "k", "R"))
        value = solve(robot, constraints, q, K_bodies, v, tau, k, R)
        return soft_dynamics_jacobians(Tree(robot, constraints, q, K_bodies), K_bodies, v, value["vdot"], value["lam"],
                                       R, wrt)
    derivative.__doc__ = f"∂(v̇, λ)/∂(q, v, τ, k, R) at {name}'s solution (the sparse LᵀDL of M + Jᵀ R⁻¹ J)."
    return derivative


def unit_target(tree, j, m):
    """T⁻¹ e_j over all rows: the desired accelerations of the orthonormalized rows for dk = e_j."""
    e = [1.0 if r == j else 0.0 for r in range(m)]
    for fac in tree.factors.values():
        if fac.rows.start <= j < fac.rows.stop:
            e[fac.rows] = fac.solve(e[fac.rows])
    return e


# -- soft constraints: pv_soft, ltl_soft ------------------------------------------------------------
def soft_dynamics_jacobians(tree, K_bodies, v, vdot, lam, R, wrt):
    """{d vdot_d x, d lam_d x} for x in ``wrt`` (q, v, tau, k, R) at the solution of the soft
    problem (PV paper Sec. VI): RNEA(q, v, v̇) − Jᵀλ = τ with λ = −R⁻¹ (γ(q, v, v̇) − k).
    Differentiating, with s = λ / R (per row):

        (M + Jᵀ R⁻¹ J) dv̇ = dτ − ∂(RNEA − Jᵀλ)/∂x − Jᵀ R⁻¹ (∂γ/∂x − dk) − Jᵀ s dR,
        dλ = −R⁻¹ (J dv̇ + ∂γ/∂x − dk) − s dR,

    M̃ = M + Jᵀ R⁻¹ J factorized by the sparse LᵀDL (no fill-in: each row couples the dofs of
    one path, as ltl_soft.py); ∂v̇/∂τ = M̃⁻¹ over common ancestors, the k and R columns from
    W = M̃⁻¹ Jᵀ (m solves).  Rows are the constraints' own K_i (not orthonormalized)."""
    robot, cs = tree.robot, tree.cs
    n, m = robot.nv, cs.m
    P = Partials(tree, v, vdot, external_forces(tree, K_bodies, lam))
    dx = tuple(x for x in wrt if x in ("q", "v"))
    d = P.dtau(dx)
    dg = {x: {} for x in (*dx, "J")}
    for i in range(tree.n):
        for rows, K in tree.own[i]:
            for x, ent in P.constraint_partials(i, K, dx).items():
                for (r, j), e in ent.items():
                    dg[x][(rows[r], j)] = e
    rinv = [1 / R[r] for r in range(m)]
    neg_rinv = [neg(x) for x in rinv]
    J = [[dg["J"].get((r, j), 0.0) for j in range(n)] for r in range(m)]
    M = dict(d["M"])
    for r in range(m):                                  # + J_rᵀ R_r⁻¹ J_r on the row's path
        nz = [j for j in range(n) if not is_zero(J[r][j])]
        w = {j: mul(J[r][j], rinv[r]) for j in nz}
        for a in nz:
            for b in nz:
                if a <= b:
                    M[(a, b)] = add(M.get((a, b), 0.0), mul(w[a], J[r][b]))
    passes.done("derivatives: ∂γ/∂q, ∂γ/∂v, J; M̃ = M + Jᵀ R⁻¹ J", dg, M)
    solver = Solver(robot, M)
    W = [solver.solve(row) for row in J] if {"tau", "k", "R"} & set(wrt) else None     # columns M̃⁻¹ J_rᵀ
    out = {}
    for x in wrt:
        if x in ("q", "v"):                 # dv̇ = −M̃⁻¹ (X + Jᵀ R⁻¹ ∂γ), dλ = −R⁻¹ (∂γ + J dv̇)
            vcols, lcols = [], []
            for j in range(n):
                g = [mul(dg[x].get((r, j), 0.0), rinv[r]) for r in range(m)]
                c = [add(d[x].get((a, j), 0.0), dot([row[a] for row in J], g)) for a in range(n)]
                dv = solver.finish(solver.half(c, -1.0))
                vcols.append(dv)
                lcols.append([mul(add(dg[x].get((r, j), 0.0), dot(J[r], dv)), neg_rinv[r]) for r in range(m)])
            out[jacobian_name("vdot", x)], out[jacobian_name("lam", x)] = matrix(vcols, n), matrix(lcols, m)
        elif x == "tau":                    # M̃⁻¹, −R⁻¹ J M̃⁻¹ = −R⁻¹ Wᵀ
            out[jacobian_name("vdot", x)] = from_entries(solver.fac.inverse(), n, n, symmetric=True)
            out[jacobian_name("lam", x)] = matrix([[mul(W[r][a], neg_rinv[r]) for r in range(m)] for a in range(n)], m)
        else:                               # dk_j: dv̇ = W_j / R_j; dR_j: dv̇ = −s_j W_j
            scale = rinv if x == "k" else [neg(mul(lam[r], rinv[r])) for r in range(m)]
            vcols = [[mul(e, scale[j]) for e in W[j]] for j in range(m)]
            lcols = []
            for j in range(m):                  # dλ = −R⁻¹ J dv̇ + (R⁻¹ e_j or −s_j e_j)
                col = [mul(dot(J[r], vcols[j]), neg_rinv[r]) for r in range(m)]
                col[j] = add(col[j], rinv[j] if x == "k" else scale[j])
                lcols.append(col)
            out[jacobian_name("vdot", x)], out[jacobian_name("lam", x)] = matrix(vcols, n), matrix(lcols, m)
        passes.done(f"derivatives: ∂v̇/∂{x}, ∂λ/∂{x}", out[jacobian_name("vdot", x)], out[jacobian_name("lam", x)])
    return out
