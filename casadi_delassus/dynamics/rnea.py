"""rnea — inverse dynamics τ = M(q) v̇ + c(q, v) by the recursive Newton-Euler algorithm, O(n).

Featherstone, Rigid Body Dynamics Algorithms (2008), Table 5.1, in the notation of the PV paper
../shared/papers/004_52dd6d88d839fc14.txt (eqs. (10), (11), (23); gravity as the world's
acceleration a_0 = −a_grav, Sec. III-B2):

  forward, roots first:   v_i = ^iX_λ v_λ + S_i q̇_i,   a_b,i = v_i × S_i q̇_i,
                          a'_i = ^iX_λ a'_λ + S_i v̇_i + a_b,i,
                          f_i = H_i a'_i + v_i ×* H_i v_i  (about the centre of mass, tree.body_force)
  backward, leaves first: τ_i = S_iᵀ f_i,   f_λ(i) += ^iX_λᵀ f_i
  armature:               τ += armature · v̇  (Pinocchio's rnea, MuJoCo's M with dof_armature)

The passes are sweeps/tree.py's: Tree.velocities and newton_euler, the one RNE (shared with ltl and
ltl_soft).
"""
from __future__ import annotations

from ..symbolic.scalar import column
from ..sweeps.dynamics_derivatives import check_wrt, from_entries, jacobian_name
from ..sweeps.rnea_derivatives import Partials
from ..sweeps.tree import Tree, inverse_dynamics


def rnea(robot, constraints, q, K_bodies, v, a):
    tree = Tree(robot, constraints, q)
    return {"tau": column(inverse_dynamics(tree, v, a)[0])}


def derivative(robot, constraints, q, K_bodies, wrt, v, a):
    """∂τ/∂(q, v, a) by sweeps/rnea_derivatives.py (∂τ/∂a = M)."""
    wrt = check_wrt("rnea", wrt, ("q", "v", "a"))
    d = Partials(Tree(robot, constraints, q), v, a).dtau(tuple(x for x in wrt if x != "a"))
    n = robot.nv
    return {jacobian_name("tau", x): from_entries(d["M"] if x == "a" else d[x], n, n, symmetric=x == "a") for x in wrt}
