"""PV-OSIMr — O(n + m²) Delassus matrix: PV-OSIM with constraint-space quantities kept
only between branching links.

PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Alg. 3 and eqs. (13), (16)-(19);
notation of its Sec. I-C.  Every constraint is an end-effector (EE) attached to its link;
a link is a branching link (N) when two or more EE-carrying branches meet there (child
subtrees with EEs, or EEs on the link itself); A(i) is the closest branching ancestor, D(i)
the closest branching descendant.  In local link frames:

  backward sweep (lines 5-15):  ^λ(i)K_D(i) = ^iK_D(i) P_iᵀ ^iX_λ(i)     (eq. 17, rows)
                                ^λ(i)Ω_D(i) = ^iΩ_D(i) + v D_i⁻¹ vᵀ,  v = ^iK_D(i) S_i (eq. 16)
                                starting from ^iK_i = 1, ^iΩ_i = 0 at i ∈ N and K_j, 0 at EEs;
                                articulated inertias in articulated.py
  forward over N (lines 16-17): ^0Ω_i = ^A(i)Ω_i + ^A(i)K_i ^0Ω_A(i) ^A(i)K_iᵀ   (eq. 18)
  backward over N (18-22):      ^cK_i = ^A(i)K_i ^cK_A(i) for every branching    (eq. 19)
                                ancestor c above A(i), from the top down (``Products``)
  assembly (23-28):             Λ⁻¹_ij = ^cK_i ^0Ω_c ^cK_jᵀ, c = cca(i, j)        (eq. 13)

Local-frame choices: Ω_D is expressed in D's own frame, so no similarity transforms; at a
free root in N, ^0Ω = S D⁻¹ Sᵀ stays as the LDLᵀ of D (never an inverse), and the rows
through it enter as Z = L⁻¹ Sᵀ Kᵀ, with Z for a deeper EE obtained as Z_A(i) ^A(i)K_iᵀ.
A free joint below the root passes nothing to its parent, so it starts a separate tree.
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca

from ..symbolic.spatial import sx
from ..symbolic import linalg, passes
from ..sweeps.articulated import articulated_inertias
from ..sweeps.constraint_space import joint_update, lead_axes
from ..symbolic.frames import slid_transforms, transform_rows


class FactoredOmega:
    """^0Ω_b = S D⁻¹ Sᵀ of a free root b, kept as the LDLᵀ factors of D.  With ``lead`` (a
    child of b with a numeric joint axis s), D is factored in a basis led by s: the rows that
    come through that child annihilate s, so their first Z entry is an exact zero."""

    def __init__(self, art, leads=()):
        self.lead = leads[0] if leads else None
        self.art = art if self.lead is None else art.leading([self.lead[0]])

    def z(self, R, via=None):
        """Z = L⁻¹ Sᵀ Rᵀ (6 x m) for rows R (m x 6) that came through the child ``via``."""
        B = [self.art.coords([R[r, c] for c in range(6)]) for r in range(R.shape[0])]
        if self.lead is not None and via in self.lead[1]:
            for b in B:
                b[0] = 0
        Z = linalg.forward_substitute(self.art.ldl[0], 6, [[b[a] for b in B] for a in range(6)])
        return linalg.to_sx_rows(Z)


@dataclass(frozen=True)
class Node:
    """A node of the branching tree: link ``body``, or the end-effector (EE) of constraint ``ee``
    on that link."""
    body: int
    ee: int | None = None

    @property
    def is_ee(self):
        return self.ee is not None


@dataclass
class BranchingTree:
    """The paper's Sec. I-C quantities for one robot and constraint set (per link i):
    ``branches[i]``, the EEs on i then the children whose subtree carries one; i ∈ ``N``
    (a branching link) when it has two or more; ``D[i]``, its closest branching descendant (an
    N-member or an EE); ``A[n]``, the closest branching ancestor of each N-member and EE (None
    at the top of a tree).  ``cut[i]``: i is a root or a free joint, which passes nothing up."""
    cut: list
    carries: list
    branches: list
    N: set
    D: list
    A: dict

    def cca(self, a, b):
        """Closest common branching ancestor of two EEs (None: different trees)."""
        anc = []
        while self.A.get(a) is not None:
            a = self.A[a]
            anc.append(a)
        while self.A.get(b) is not None:
            b = self.A[b]
            if b in anc:
                return b
        return None


def branching_tree(robot, constraints):
    n = robot.n_bodies
    cut = [robot.parent(i) < 0 or robot.bodies[i].joint.kind == "free" for i in range(n)]
    ees = [[] for _ in range(n)]
    for j, c in enumerate(constraints.constraints):
        ees[c.body].append(Node(c.body, j))
    carries = [bool(ees[i]) for i in range(n)]
    for i in reversed(range(n)):
        if carries[i] and not cut[i]:
            carries[robot.parent(i)] = True
    branches = [list(ees[i]) for i in range(n)]
    for i in range(n):
        if carries[i] and not cut[i]:
            branches[robot.parent(i)].append(Node(i))
    N = {i for i in range(n) if len(branches[i]) >= 2}
    D = [None] * n
    for i in reversed(range(n)):                       # from branch data only: a sibling
        if carries[i]:                                 # without EEs never touches D
            first = branches[i][0]
            D[i] = Node(i) if i in N else first if first.is_ee else D[first.body]
    A = {}
    for i in range(n):
        if not carries[i]:
            continue
        j = i
        while not cut[j] and robot.parent(j) not in N:
            j = robot.parent(j)
        up = None if cut[j] else Node(robot.parent(j))
        if i in N:
            A[Node(i)] = up
        for e in ees[i]:
            A[e] = Node(i) if i in N else up
    return BranchingTree(cut, carries, branches, N, D, A)


@dataclass
class Carried:
    """What a link passes up to its parent, or an N-member to its branching ancestor: the rows
    ^λK_n (or ^A(n)K_n) of the branching descendant ``node`` and their ^λΩ_n (upper entries)."""
    K: ca.SX
    Omega: dict
    node: Node = None


def backward(robot, constraints, tree, T, abi, Ks):
    """Alg. 3 lines 5-15: (top, omega0, via) with top[n] = ^A(n)K_n, ^A(n)Ω_n (a Carried) for the
    N-members n below a branching link, omega0[n] = ^0Ω_n where A(n) = 0, via[n] = the child
    of A(n) that n's rows came through (None for an EE on A(n) itself)."""
    rows_of = lambda node: Ks[node.ee].shape[0] if node.is_ee else 6   # noqa: E731
    weight = [0] * robot.n_bodies                          # constraint rows in each subtree
    for K, c in zip(Ks, (c.body for c in constraints.constraints)):
        for i in robot.ancestors(c):
            weight[i] += K.shape[0]
    up, top, omega0, via = {}, {}, {}, {}
    for i in reversed(range(robot.n_bodies)):
        if not tree.carries[i]:
            continue
        child = None
        if i in tree.N:
            cur = Carried(ca.SX.eye(6), {}, Node(i))       # ^iK_i = 1, ^iΩ_i = 0 (line 7)
            for b in tree.branches[i]:                     # ^iK_n, ^iΩ_n for the N-members
                if b.is_ee:                                # n just below i (line 4)
                    top[b], via[b] = Carried(Ks[b.ee], {}), None
                else:
                    top[up[b.body].node], via[up[b.body].node] = up[b.body], b.body
        else:
            b = tree.branches[i][0]
            cur = Carried(Ks[b.ee], {}, b) if b.is_ee else up[b.body]
            child = None if b.is_ee else b.body
        art, m = abi[i], rows_of(cur.node)
        if art.free:                                       # ^0Ω_D(i) through D_i = LDLᵀ
            if i in tree.N:
                kids = {b.body: weight[b.body] for b in tree.branches[i] if not b.is_ee}
                omega0[cur.node] = FactoredOmega(art, lead_axes(T, abi, kids, 1))
            else:
                fo = FactoredOmega(art, lead_axes(T, abi, {child: 1}, 1) if child is not None else ())
                Z = fo.z(cur.K, child)
                omega0[cur.node] = _add(cur.Omega, _gram(Z, fo.art.ldl[2], Z, m, True))
            continue
        Kp, v = art.project_rows(cur.K)
        Om = dict(cur.Omega)
        joint_update(Om, list(range(m)), art, v)           # eq. (16)
        if tree.cut[i]:
            omega0[cur.node] = Om                          # fixed-base root: ^0Ω_D(i)
        else:
            up[i] = Carried(transform_rows(T[i], Kp), Om, cur.node)   # eq. (17)
    return top, omega0, via


class Products:
    """The rows ^cK_n of a node n (an EE or an N-member) at a branching ancestor c, in the form
    eq. (13)'s products with ^0Ω_c take, each computed once: K = ^cK_n and Y = ^0Ω_c ^cK_nᵀ where
    ^0Ω_c is explicit; Z = L⁻¹ Sᵀ ^cK_nᵀ and Zs = D⁻¹ Z where it is a free root's factored one.
    ``direct`` fills c = A(n) (what the backward sweep left, read by lines 16-17), ``compose`` the
    ancestors above it (eq. 19, lines 18-22); ``block`` reads them (lines 17, 25)."""

    def __init__(self, A, top, omega0, rows, via):
        self.A, self.top, self.omega0, self.rows, self.via = A, top, omega0, rows, via
        self.K, self.Y, self.Z, self.Zs = {}, {}, {}, {}

    def factored(self, c):
        return isinstance(self.omega0[c], FactoredOmega)

    def direct(self, n):
        """^A(n)K_n, the rows n's backward sweep carried to its branching ancestor."""
        c, R = self.A[n], self.top[n].K
        if self.factored(c):
            self._z(c, n, self.omega0[c].z(R, self.via[n]))
        else:
            self._k(c, n, R)

    def compose(self, c, n):
        """Eq. (19): ^cK_n = ^A(n)K_n ^cK_A(n) for a branching ancestor c above A(n)."""
        R, up = self.top[n].K, (c, self.A[n])
        if self.factored(c):
            self._z(c, n, ca.mtimes(self.Z[up], R.T))
        else:
            self._k(c, n, ca.mtimes(R, self.K[up]))

    def _z(self, c, n, Z):
        dinv = self.omega0[c].art.ldl[2]
        self.Z[c, n] = Z
        self.Zs[c, n] = ca.vertcat(*[Z[r, :] * dinv[r] for r in range(6)])

    def _k(self, c, n, K):
        self.K[c, n] = K
        self.Y[c, n] = ca.mtimes(linalg.to_sx(self.omega0[c], 6), K.T)

    def block(self, c, a, b, upper):
        """^cK_a ^0Ω_c ^cK_bᵀ (eq. 13; upper entries only when a is b)."""
        Pa, Pb = (self.Zs[c, a], self.Z[c, b]) if self.factored(c) else (self.K[c, a].T, self.Y[c, b])
        return {(p, q): ca.dot(Pa[:, p], Pb[:, q]) for p in range(self.rows(a))
                for q in range(p if upper else 0, self.rows(b))}


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    abi = articulated_inertias(robot, T)
    tree = branching_tree(robot, constraints)
    Ks = [sx(K) for K in K_bodies]
    top, omega0, via = backward(robot, constraints, tree, T, abi, Ks)
    passes.done("articulated inertias H^A", [abi[i].HA if abi[i].free else abi[i].Ubar
                                             for i in range(robot.n_bodies) if tree.carries[i]])
    passes.done("backward: ^λK_D, ^λΩ_D between branching links (16-17)",
                [(c.K, c.Omega) for c in top.values()], [_entries(om) for om in omega0.values()])
    blocks = Products(tree.A, top, omega0, lambda n: Ks[n.ee].shape[0] if n.is_ee else 6, via)
    below = sorted((n for n in tree.A if tree.A[n] is not None), key=lambda n: (n.body, n.is_ee))   # parents first
    for n in below:                                    # forward sweep over N (lines 16-17)
        blocks.direct(n)
        omega0[n] = _add(top[n].Omega, blocks.block(tree.A[n], n, n, True))          # eq. (18)
    passes.done("forward over N: ^0Ω_i (eq. 18)", [_entries(om) for om in omega0.values()])
    for n in below:                                    # backward sweep over N (lines 18-22)
        c = tree.A[tree.A[n]]
        while c is not None:                           # every branching ancestor above A(n)
            blocks.compose(c, n)                       # eq. (19), line 20
            c = tree.A[c]
    # assembly (lines 23-28): line 28 for diagonal blocks, line 25 off the diagonal
    L = {}
    ees = [Node(c.body, j) for j, c in enumerate(constraints.constraints)]
    for a, na in enumerate(ees):
        ra = constraints.offsets[a]
        for (p, q_), e in omega0[na].items():                                       # line 28
            L[(ra + p, ra + q_)] = e
        for b in range(a + 1, len(ees)):
            c = tree.cca(na, ees[b])
            if c is None:
                continue                                   # separate trees: no coupling
            rb = constraints.offsets[b]
            for (p, q_), e in blocks.block(c, na, ees[b], False).items():           # line 25
                L[(ra + p, rb + q_)] = e
    return {"delassus": linalg.to_sx(L, constraints.m)}


def _entries(omega):
    """The SX entries of a ^0Ω: upper entries, or a free root's LDLᵀ factors (L, D⁻¹)."""
    return omega if isinstance(omega, dict) else (omega.art.ldl[0], omega.art.ldl[2])


def _gram(Za, dinv, Zb, ma, upper):
    """Zaᵀ d⁻¹ Zb entries (upper only when ``upper``, i.e. Za is Zb)."""
    mb = Zb.shape[1]
    Zs = ca.SX(Za)
    for r in range(6):
        Zs[r, :] = Za[r, :] * dinv[r]
    return {(p, q): ca.dot(Zs[:, p], Zb[:, q]) for p in range(ma) for q in range(p if upper else 0, mb)}


def _add(a, b):
    out = dict(a)
    for k, e in b.items():
        out[k] = out.get(k, 0) + e
    return out
