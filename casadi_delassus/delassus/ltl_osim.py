"""ltl_osim — Featherstone's LTL-OSIM: Λ⁻¹ = J M⁻¹ Jᵀ from the sparse factorization
M = Lᵀ D L, Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ (no square roots), O(nd² + md² + m²d).

PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. II-A eqs. (4)-(6); PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Sec. II-C eqs. (6)-(8); EFPA paper
../shared/papers/003_3d6496c5334b6d59.txt, Sec. V-B (SFA).  M comes from the CRBA
(kinematics.mass_matrix) and J from kinematics.constraint_jacobian, both fed with the
local transforms of frames.py (plane rotations, frames slid along the joint axes); the
Jacobian is counted.  A free base keeps its model frame: where a child's joint axis runs
through its origin along a coordinate axis (Talos' torso), the two columns of M coincide and
the factorization shares their products (linalg.Shared); sliding the base to zero other
offsets would cost more there than it saves.

Branch-induced sparsity: with the dofs numbered parents first and λ(k) the parent dof of k,
M_ki ≠ 0 only for i an ancestor of k.  Factorizing leaves first keeps L (unit lower,
L_ki for i ∈ anc(k)) inside M's pattern — no fill-in — and the rows of Y keep J's pattern
(the supports of each constraint's link), so every loop below runs over ancestor chains
only."""
from __future__ import annotations

from ..sweeps import joint_space as kinematics
from ..symbolic import linalg
from ..symbolic.frames import choose_offsets, local_transforms
from ..symbolic.scalar import is_zero


def dof_parents(robot):
    """λ(k) for every dof k (-1 at the root): a multi-dof joint is a chain of its dofs."""
    lam = []
    for b in robot.bodies:
        p = robot.bodies[b.parent] if b.parent >= 0 else None
        prev = p.v_index + p.joint.nv - 1 if p is not None else -1
        for t in range(b.joint.nv):
            lam.append(prev if t == 0 else b.v_index + t - 1)
    return lam


def ltdl(M, lam, ops):
    """M = Lᵀ D L for M given as {(i, k): e} keyed i <= k: returns (L as {(k, i): L_ki}, D⁻¹)."""
    n = len(lam)
    H = {(k, i): e for (i, k), e in M.items()}                    # lower entries H[k, i], i <= k
    L, Dinv = {}, [None] * n
    for k in reversed(range(n)):
        Dinv[k] = 1 / H[(k, k)]
        i = lam[k]
        while i >= 0:
            a = ops.mul(H[(k, i)], Dinv[k])
            j = i
            while j >= 0:                                          # Schur update of anc(k)
                H[(i, j)] = ops.sub(H[(i, j)], ops.mul(a, H[(k, j)]))
                j = lam[j]
            L[(k, i)] = a
            i = lam[i]
    return L, Dinv


def solve_rows(J, L, lam, ops):
    """Y = J L⁻¹ row by row (Y L = J), leaves first, zeros of J skipped."""
    Y = []
    for r in range(J.shape[0]):
        y = [J[r, c] if not J[r, c].is_zero() else 0 for c in range(J.shape[1])]
        for k in reversed(range(len(lam))):
            if is_zero(y[k]):
                continue
            i = lam[k]
            while i >= 0:
                y[i] = ops.sub(y[i], ops.mul(y[k], L[(k, i)]))
                i = lam[i]
        Y.append(y)
    return Y


def sweeps(robot, constraints, q, K_bodies):
    """LTL-OSIM's intermediate quantities: {'M', 'J', 'L', 'Dinv', 'Y', 'delassus'}."""
    T = local_transforms(robot, q, choose_offsets(robot, constraints, move_free=False))
    M = kinematics.mass_matrix(robot, T)                          # CRBA, upper entries
    J = kinematics.constraint_jacobian(robot, constraints, T, K_bodies)
    lam = dof_parents(robot)
    ops = linalg.Shared()
    L, Dinv = ltdl(M, lam, ops)
    Y = solve_rows(J, L, lam, ops)
    Yd = [[0 if is_zero(e) else ops.mul(e, d) for e, d in zip(row, Dinv)] for row in Y]   # Y D⁻¹
    upper = {(a, b): ops.dot(Yd[a], Y[b]) for a in range(len(Y)) for b in range(a, len(Y))}
    return {"M": M, "J": J, "L": L, "Dinv": Dinv, "Y": Y, "delassus": linalg.to_sx(upper, len(Y))}


def delassus(robot, constraints, q, K_bodies):
    return {"delassus": sweeps(robot, constraints, q, K_bodies)["delassus"]}
