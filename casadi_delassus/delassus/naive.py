"""naive — the Delassus matrix by the definition Λ⁻¹ = J M⁻¹ Jᵀ: CRBA for M, the
constraint Jacobian J, a dense LDLᵀ of M in natural (root-first) order and
Λ⁻¹ = Zᵀ D⁻¹ Z with Z = L⁻¹ Jᵀ.  The baseline every recursive algorithm is compared with
(PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. I; EFPA paper
../shared/papers/003_3d6496c5334b6d59.txt, Sec. V)."""
from __future__ import annotations

from ..sweeps import joint_space
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    M = joint_space.mass_matrix(robot, T)
    passes.done("CRBA: M", M)
    J = joint_space.constraint_jacobian(robot, constraints, T, K_bodies)
    passes.done("constraint Jacobian J", J)
    L, _, Dinv = linalg.ldl(M, robot.nv)
    passes.done("dense LDLᵀ of M", L, Dinv)
    Jt = [[J[r, i] for r in range(constraints.m)] for i in range(robot.nv)]
    Z = linalg.forward_substitute(L, robot.nv, Jt)
    return {"delassus": linalg.to_sx(linalg.scaled_gram(Z, Dinv, constraints.m), constraints.m)}
