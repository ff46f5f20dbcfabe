"""Passes over the kinematic tree shared by several algorithms: articulated inertias, the
dynamics solvers' tree recursions, the joint-space CRBA / Jacobian / sparse LᵀDL."""
