"""naive — the Delassus matrix by the definition Λ⁻¹ = J M⁻¹ Jᵀ: CRBA for M, the
constraint Jacobian J, a dense LDLᵀ of M in natural (root-first) order and
Λ⁻¹ = Zᵀ D⁻¹ Z with Z = L⁻¹ Jᵀ.  The baseline every recursive algorithm is compared with
(PV-OSIMr paper ../shared/papers/000_82174d5af858539c.txt, Sec. I; EFPA paper
../shared/papers/003_3d6496c5334b6d59.txt, Sec. V).  For coupled mimic joints (v = G v_r,
model/mimic.py) it works in the reduced velocities: M_r = Gᵀ M G and J_r = J G."""
from __future__ import annotations

import casadi as ca

from ..sweeps import joint_space
from ..symbolic import linalg, passes
from ..symbolic.frames import slid_transforms


def delassus(robot, constraints, q, K_bodies):
    T = slid_transforms(robot, constraints, q)
    M = joint_space.mass_matrix(robot, T)
    passes.done("CRBA: M", M)
    J = joint_space.constraint_jacobian(robot, constraints, T, K_bodies)
    passes.done("constraint Jacobian J", J)
    M, J, nv = _reduced(robot, M, J)
    L, _, Dinv = linalg.ldl(M, nv)
    passes.done("dense LDLᵀ of M", L, Dinv)
    Jt = [[J[r, i] for r in range(constraints.m)] for i in range(nv)]
    Z = linalg.forward_substitute(L, nv, Jt)
    return {"delassus": linalg.to_sx(linalg.scaled_gram(Z, Dinv, constraints.m), constraints.m)}


def _reduced(robot, M, J):
    """(upper entries of Gᵀ M G, J G, nv_r) for a robot with coupled mimic joints, else (M, J, nv)."""
    if robot.coupling is None:
        return M, J, robot.nv
    G = ca.sparsify(ca.DM(robot.coupling.G))       # zeros structural: no 0·x terms in the trace
    Mr = ca.mtimes([G.T, linalg.to_sx(M, robot.nv), G])
    return linalg.upper_entries(Mr), ca.mtimes(J, G), robot.coupling.nv
