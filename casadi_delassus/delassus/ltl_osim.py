"""ltl_osim — Featherstone's LTL-OSIM: Λ⁻¹ = J M⁻¹ Jᵀ from the sparse factorization
M = Lᵀ D L, Y = J L⁻¹, Λ⁻¹ = Y D⁻¹ Yᵀ (no square roots), O(nd² + md² + m²d).

PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. II-A eqs. (4)-(6); PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Sec. II-C eqs. (6)-(8); EFPA paper
../shared/papers/003_3d6496c5334b6d59.txt, Sec. V-B (SFA).  M comes from the CRBA
(joint_space.mass_matrix) and J from joint_space.constraint_jacobian, both fed with the
local transforms of frames.py (plane rotations, frames slid along the joint axes); the
Jacobian is counted.  A free base keeps its model frame: where a child's joint axis runs
through its origin along a coordinate axis (Talos' torso), the two columns of M coincide and
the factorization shares their products (linalg.Shared); sliding the base to zero other
offsets would cost more there than it saves.

The factorization leaves first keeps L inside M's pattern (branch-induced sparsity,
sweeps/joint_space.py) and the rows of Y keep J's pattern (the supports of each constraint's
link), so every loop runs over ancestor chains only."""
from __future__ import annotations

from ..sweeps import joint_space
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms
from ..symbolic.scalar import is_zero


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q, move_free=False)
    M = joint_space.mass_matrix(robot, T)                         # CRBA, upper entries
    passes.done("CRBA: M", M)
    J = joint_space.constraint_jacobian(robot, constraints, T, K_bodies)
    passes.done("constraint Jacobian J", J)
    parents, ops = joint_space.dof_parents(robot), linalg.Shared()
    L, _, Dinv = joint_space.ltdl(M, parents, ops)
    passes.done("M = Lᵀ D L (sparse)", L, Dinv)
    Y = [joint_space.solve_lt(L, parents, [0 if J[r, c].is_zero() else J[r, c] for c in range(robot.nv)], ops)
         for r in range(constraints.m)]
    passes.done("Y = J L⁻¹", Y)
    Yd = [[0 if is_zero(e) else ops.mul(e, d) for e, d in zip(row, Dinv)] for row in Y]   # Y D⁻¹
    upper = {(a, b): ops.dot(Yd[a], Y[b]) for a in range(len(Y)) for b in range(a, len(Y))}
    return {"delassus": linalg.to_sx(upper, len(Y))}
