"""The independent NumPy oracle: plain loops over full 6x6 Plücker matrices.

Deliberately shares no code with the symbolic algorithms (only the data classes of
``model/robot.py`` and ``ConstraintSet``), and favours obvious correctness over speed,
so that a bug in the SX implementations cannot hide in a shared helper.

Spatial vectors are Featherstone's [angular; linear], in body coordinates (a body's
coordinates are its joint frame after the joint's motion, see ``model/robot.py``).

Joint conventions (``Joint.quaternion``, ``Joint.velocity``): quaternions are read in each
joint's order (x, y, z, w or w, x, y, z).  The kinematics and dynamics below run in local
velocity coordinates (Pinocchio's: a free joint's [v; ω] in its body frame); a free joint with
MuJoCo velocities ([ṗ; ω], ṗ in the parent frame) enters through v_local = T(q) v
(``velocity_map``) at every public function: M = Tᵀ M_local T, J = J_local T, τ = Tᵀ τ_local,
v̇_local = T v̇ + Ṫ v.  Armature (``Robot.armature``) is added in the joints' own coordinates:
M += diag(armature), τ += armature · v̇ (as Pinocchio and MuJoCo define it).
"""
from __future__ import annotations

import numpy as np

from ..constraints import ConstraintSet  # noqa: F401  (documented input type)
from ..errors import ConstraintError
from ..model.robot import cross_matrix


# -- spatial algebra (6x6, kept local on purpose) ---------------------------------------
def plucker(E, r):
    """Motion transform from A to B coordinates; E maps A coords to B coords, r is B's
    origin in A coords."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ cross_matrix(r)
    return X


def crm(v):
    """Motion cross product matrix: crm(v) @ m = v x m."""
    out = np.zeros((6, 6))
    out[:3, :3] = cross_matrix(v[:3])
    out[3:, 3:] = cross_matrix(v[:3])
    out[3:, :3] = cross_matrix(v[3:])
    return out


def crf(v):
    """Force cross product matrix: crf(v) @ f = v x* f."""
    return -crm(v).T


def axis_rotation(axis, c, s):
    """Rotation matrix (columns: rotated axes) by the angle with cosine c and sine s about a
    unit axis (Rodrigues)."""
    A = cross_matrix(axis)
    return np.eye(3) + s * A + (1.0 - c) * A @ A


def quaternion_rotation(x, y, z, w):
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _unit_quaternion(joint, quat):
    """(x, y, z, w) from the joint's four quaternion entries in its own order, normalised."""
    x = np.asarray(quat, float)
    if joint.quaternion == "wxyz":
        x = np.array([x[1], x[2], x[3], x[0]])
    return x / np.linalg.norm(x)


def joint_transform(joint, qj):
    """X_J(q): motion transform from the joint frame before motion to the body frame."""
    if joint.kind == "revolute":
        # The body frame is the joint frame rotated by q about the axis; E maps into it.
        return plucker(axis_rotation(joint.axis, np.cos(qj[0]), np.sin(qj[0])).T, np.zeros(3))
    if joint.kind == "continuous":
        # Pinocchio's unbounded revolute stores (cos, sin) directly.
        return plucker(axis_rotation(joint.axis, qj[0], qj[1]).T, np.zeros(3))
    if joint.kind == "prismatic":
        return plucker(np.eye(3), joint.axis * qj[0])
    if joint.kind == "free":
        R = quaternion_rotation(*_unit_quaternion(joint, qj[3:7]))  # body -> parent (world)
        return plucker(R.T, qj[0:3])
    if joint.kind == "ball":
        # a spherical joint turns about the body origin: no translation
        return plucker(quaternion_rotation(*_unit_quaternion(joint, qj[0:4])).T, np.zeros(3))
    raise ValueError(f"unsupported joint kind {joint.kind!r}")


def parent_transforms(robot, q):
    """^iX_parent(i) = X_J(q_i) X_T(i) for every body."""
    q = np.asarray(q, dtype=float).reshape(-1)
    out = []
    for b in robot.bodies:
        X_T = plucker(b.rotation, b.translation)
        out.append(joint_transform(b.joint, q[b.q_index:b.q_index + b.joint.nq]) @ X_T)
    return out


def _vslice(body):
    return slice(body.v_index, body.v_index + body.joint.nv)


def velocity_map(robot, q, v=None):
    """(T, Ṫ v): the local velocity coordinates are v_local = T v.  T is the identity except for
    a free joint with MuJoCo velocities, whose ṗ (parent frame) is E ṗ in body coordinates
    (E: parent -> body); there d/dt (E ṗ) = E p̈ + Ė ṗ with Ė ṗ = −ω × (E ṗ), ω in body
    coordinates.  Ṫ v is zero when ``v`` is None."""
    X_up = parent_transforms(robot, q)
    T, Tdv = np.eye(robot.nv), np.zeros(robot.nv)
    for i, b in enumerate(robot.bodies):
        if b.joint.kind == "free" and b.joint.velocity == "mujoco":
            k, E = b.v_index, X_up[i][:3, :3]
            T[k:k + 3, k:k + 3] = E
            if v is not None:
                Tdv[k:k + 3] = -np.cross(v[k + 3:k + 6], E @ v[k:k + 3])
    return T, Tdv


# -- kinematics and dynamics -------------------------------------------------------------
def mass_matrix(robot, q):
    """Joint-space mass matrix M(q) in the joints' velocity coordinates, armature included."""
    T, _ = velocity_map(robot, q)
    return T.T @ _local_mass_matrix(robot, q) @ T + np.diag(robot.armature)


def _local_mass_matrix(robot, q):
    """M(q) in local velocity coordinates, without armature, by the composite-rigid-body algorithm."""
    X_up = parent_transforms(robot, q)
    n = robot.n_bodies
    Ic = [b.spatial_inertia().copy() for b in robot.bodies]
    # Leaves first, so each composite inertia is complete before it is passed up.
    for i in reversed(range(n)):
        p = robot.bodies[i].parent
        if p >= 0:
            Ic[p] = Ic[p] + X_up[i].T @ Ic[i] @ X_up[i]
    M = np.zeros((robot.nv, robot.nv))
    for i in range(n):
        bi = robot.bodies[i]
        S_i = bi.joint.motion_subspace()
        F = Ic[i] @ S_i                     # force needed to move the subtree along S_i
        diag = S_i.T @ F
        M[_vslice(bi), _vslice(bi)] = 0.5 * (diag + diag.T)   # exact symmetry despite rounding
        j = i
        while robot.bodies[j].parent >= 0:
            F = X_up[j].T @ F               # express the force in the parent's coordinates
            j = robot.bodies[j].parent
            bj = robot.bodies[j]
            block = F.T @ bj.joint.motion_subspace()
            M[_vslice(bi), _vslice(bj)] = block
            M[_vslice(bj), _vslice(bi)] = block.T
    return M


def body_jacobian(robot, q, body):
    """6 x nv Jacobian of body ``body``'s spatial velocity in its own coordinates
    ([angular; linear]), for the joints' velocity coordinates."""
    return _local_body_jacobian(robot, q, body) @ velocity_map(robot, q)[0]


def _local_body_jacobian(robot, q, body):
    """``body_jacobian`` for local velocity coordinates."""
    X_up = parent_transforms(robot, q)
    J = np.zeros((6, robot.nv))
    X = np.eye(6)                           # ^body X_j, grown one ancestor at a time
    j = body
    while j >= 0:
        bj = robot.bodies[j]
        J[:, _vslice(bj)] = X @ bj.joint.motion_subspace()
        X = X @ X_up[j]
        j = bj.parent
    return J


def world_transform(robot, q, body):
    """^body X_0: motion transform from world to body coordinates (product along the tree)."""
    X_up = parent_transforms(robot, q)
    X = np.eye(6)
    for j in robot.ancestors(body):         # body first: X = X_up[body] ... X_up[root]
        X = X @ X_up[j]
    return X


def _origin(X):
    """The body's origin in world coordinates from ^body X_0 = [[E, 0], [−E r×, E]]."""
    rx = -X[:3, :3].T @ X[3:, :3]
    return np.array([rx[2, 1], rx[0, 2], rx[1, 0]])


def _point_jacobian(robot, q, body, point):
    """3 x nv Jacobian of the world velocity of a point fixed on ``body`` (body coordinates)."""
    X = world_transform(robot, q, body)
    E = X[:3, :3]
    Jw = np.linalg.inv(X) @ body_jacobian(robot, q, body)       # spatial velocity, world coordinates
    p = _origin(X) + E.T @ point
    return Jw[3:] - cross_matrix(p) @ Jw[:3]                    # v_O + ω × p


def _pair_rows(robot, q, c, K):
    """A|B rows from world-frame velocities, along A's frame axes: 6d: K_A (J_A − ^AX_B J_B)
    (B's spatial velocity taken at A); 3d: A's point velocity (K_A J_A, as for a constraint to
    the world) minus the world velocity of B's point turned into A's frame axes."""
    XA, XB = world_transform(robot, q, c.body), world_transform(robot, q, c.body2)
    JA = K @ body_jacobian(robot, q, c.body)
    if c.kind == "6d":
        return JA - K @ XA @ np.linalg.inv(XB) @ body_jacobian(robot, q, c.body2)
    axes = XA[:3, :3].T @ c.axes                              # A's frame axes, world coordinates
    return JA - axes.T @ _point_jacobian(robot, q, c.body2, c.point2)


def _world_rows(robot, q, c):
    """World-aligned rows from world-frame velocities: the point's world velocity (3d-world), or
    the frame origin's world velocity over the world angular velocity (6d-world)."""
    X = world_transform(robot, q, c.body)
    Jw = np.linalg.inv(X) @ body_jacobian(robot, q, c.body)     # spatial velocity, world coordinates
    point = _point_jacobian(robot, q, c.body, c.point)
    return point if c.rows == 3 else np.vstack([point, Jw[:3]])


def constraint_jacobian(robot, constraints, q, K_inputs=None):
    """J (m x nv) in the order the constraints were given: K_i @ body Jacobian for a
    constraint to the world, world velocities for world-aligned rows, relative velocities for
    A|B, unit rows for a joint."""
    Ks = constraints.K_body(K_inputs)
    blocks = []
    for c, K in zip(constraints.constraints, Ks):
        if c.world:
            rows = _world_rows(robot, q, c)
        elif c.joint:
            rows = np.zeros((c.rows, robot.nv))
            rows[:, _vslice(robot.bodies[c.body])] = np.eye(c.rows)
        elif c.body2 is not None:
            rows = _pair_rows(robot, q, c, K)
        else:
            rows = K @ body_jacobian(robot, q, c.body)
        blocks.append(rows)
    return np.vstack(blocks)


def delassus(robot, constraints, q, K_inputs=None):
    """Delassus matrix J M^-1 J^T."""
    J = constraint_jacobian(robot, constraints, q, K_inputs)
    L = np.linalg.cholesky(mass_matrix(robot, q))
    Y = np.linalg.solve(L, J.T)             # L^-1 J^T, so that D = Y^T Y is symmetric by construction
    return Y.T @ Y


def osim(robot, constraints, q, K_inputs=None, rcond=1e-12):
    """Operational-space inertia Lambda = D^-1; ConstraintError if D is rank-deficient."""
    D = delassus(robot, constraints, q, K_inputs)
    eig = np.linalg.eigvalsh(D)
    if eig.max() <= 0 or eig.min() <= rcond * eig.max():
        raise ConstraintError(
            f"the Delassus matrix of constraints {constraints.specs} is rank-deficient "
            f"(eigenvalues {eig.min():.3g} .. {eig.max():.3g}): the constraints are redundant, "
            f"so the operational-space inertia does not exist")
    Lam = np.linalg.solve(D, np.eye(D.shape[0]))
    return 0.5 * (Lam + Lam.T)


def bias_forces(robot, q, v):
    """C(q, v) v + g(q) by the recursive Newton-Euler algorithm with zero acceleration."""
    return inverse_dynamics(robot, q, v, np.zeros(robot.nv))


def inverse_dynamics(robot, q, v, a):
    """tau = M(q) a + C(q, v) v + g(q) (RNEA), armature included, in the joints' velocity
    coordinates.  Gravity ``robot.gravity`` is in world coordinates, and the world is every root
    body's parent frame."""
    v = np.asarray(v, dtype=float).reshape(-1)
    a = np.asarray(a, dtype=float).reshape(-1)
    T, Tdv = velocity_map(robot, q, v)
    return T.T @ _local_inverse_dynamics(robot, q, T @ v, T @ a + Tdv) + robot.armature * a


def _local_inverse_dynamics(robot, q, v, a):
    """RNEA in local velocity coordinates, without armature."""
    X_up = parent_transforms(robot, q)
    # Fictitious upward acceleration of the world stands in for gravity.
    a_world = np.concatenate([np.zeros(3), -robot.gravity])
    n = robot.n_bodies
    vel, acc, f = [None] * n, [None] * n, [None] * n
    for i, b in enumerate(robot.bodies):
        S = b.joint.motion_subspace()
        vJ = S @ v[_vslice(b)]
        if b.parent < 0:
            vel[i] = vJ
            acc[i] = X_up[i] @ a_world + S @ a[_vslice(b)]
        else:
            vel[i] = X_up[i] @ vel[b.parent] + vJ
            acc[i] = X_up[i] @ acc[b.parent] + S @ a[_vslice(b)] + crm(vel[i]) @ vJ
        I = b.spatial_inertia()
        f[i] = I @ acc[i] + crf(vel[i]) @ I @ vel[i]
    tau = np.zeros(robot.nv)
    for i in reversed(range(n)):
        b = robot.bodies[i]
        tau[_vslice(b)] = b.joint.motion_subspace().T @ f[i]
        if b.parent >= 0:
            f[b.parent] = f[b.parent] + X_up[i].T @ f[i]
    return tau


def forward_dynamics(robot, q, v, tau):
    """Unconstrained joint acceleration M^-1 (tau - bias)."""
    return np.linalg.solve(mass_matrix(robot, q), np.asarray(tau, float) - bias_forces(robot, q, v))


# -- constrained dynamics (dense KKT) ------------------------------------------------------
# Convention (PV paper ../shared/papers/004_52dd6d88d839fc14.txt, eqs. (1)-(4), with
# Pinocchio's sign for the multipliers):
#     M(q) v̇ + c(q, v) = τ + Jᵀ λ,        J v̇ + J̇ v = k,
# c = C(q, v) v + g(q) (gravity ``robot.gravity``, world coordinates), J the constraint
# Jacobian (rows K_i acting on body i's spatial velocity in body coordinates, the rows of
# ``constraint_jacobian``) and J̇ v the matching *spatial* drift K_i (J̇_i v): K_i applied to
# body i's spatial acceleration when v̇ = 0 and gravity is off (``bias_accelerations``).
# For a 6D weld (CONTACT_6D, LOCAL) this is Pinocchio's constraint acceleration; for a 3D
# point Pinocchio constrains the *classical* acceleration a_p + ω × v_p, i.e. our
# k = k_pin − ω × v_p (frame axes).  λ = Pinocchio's ``data.lambda_c``.

def bias_accelerations(robot, q, v):
    """Spatial acceleration (body coordinates, [angular; linear]) of every body for v̇ = 0,
    without gravity: J̇_i v."""
    return _bias_motion(robot, q, v)[1]


def _bias_motion(robot, q, v):
    """(velocities, bias accelerations) of every body, body coordinates: the plain forward
    recursion v_i = X v_parent + S_i v_i, a_i = X a_parent + S_i v̇_local,i + v_i × S_i v_i,
    v̇_local = Ṫ v (zero but for free joints with MuJoCo velocities)."""
    X_up = parent_transforms(robot, q)
    v = np.asarray(v, dtype=float).reshape(-1)
    T, Tdv = velocity_map(robot, q, v)
    v = T @ v
    vel, acc = [None] * robot.n_bodies, [None] * robot.n_bodies
    for i, b in enumerate(robot.bodies):
        S = b.joint.motion_subspace()
        vJ, aJ = S @ v[_vslice(b)], S @ Tdv[_vslice(b)]
        if b.parent < 0:
            vel[i], acc[i] = vJ, aJ                 # S constant in body coordinates, vJ x vJ = 0
        else:
            vel[i] = X_up[i] @ vel[b.parent] + vJ
            acc[i] = X_up[i] @ acc[b.parent] + aJ + crm(vel[i]) @ vJ
    return vel, acc


def _world_drift(robot, q, c, vel, acc):
    """J̇ v of world-aligned rows: the classical acceleration (world axes) of the point at v̇ = 0,
    a_p = a_O + α × p + ω × (v_O + ω × p) from the spatial velocity and acceleration in world
    coordinates, over the angular acceleration α for 6d-world."""
    X = world_transform(robot, q, c.body)
    Xinv = np.linalg.inv(X)
    (w, v_O), (alpha, a_O) = np.split(Xinv @ vel[c.body], 2), np.split(Xinv @ acc[c.body], 2)
    p = _origin(X) + X[:3, :3].T @ c.point
    a_p = a_O + np.cross(alpha, p) + np.cross(w, v_O + np.cross(w, p))
    return a_p if c.rows == 3 else np.concatenate([a_p, alpha])


def constraint_drift(robot, constraints, q, v, K_inputs=None):
    """J̇ v (m): K_i applied to body i's bias acceleration (``bias_accelerations``), the time
    derivative of world velocities for world-aligned rows (``_world_drift``); zero for a
    joint's rows (J is constant there).  A|B rows are not covered (K_B depends on q)."""
    pairs = [c.spec for c in constraints.constraints if c.body2 is not None]
    if pairs:
        raise ConstraintError(f"the drift J̇v of link-to-link constraints {pairs} is not implemented")
    vel, acc = _bias_motion(robot, q, v)
    Ks = constraints.K_body(K_inputs)
    return np.concatenate([np.zeros(c.rows) if c.joint else _world_drift(robot, q, c, vel, acc) if c.world
                           else K @ acc[c.body] for c, K in zip(constraints.constraints, Ks)])


def _redundancy(J, D, constraints, rcond):
    """None, or a message when the Delassus matrix D = J M⁻¹ Jᵀ is (numerically) singular:
    redundant or conflicting rows when J itself has lower row rank (its singular values below
    √rcond of the largest: κ(D) grows as κ(J)²), else ill-conditioned rows (full-rank J, a
    mass matrix that makes D near singular: a very light body)."""
    eig = np.linalg.eigvalsh(0.5 * (D + D.T))
    if eig.max() > 0 and eig.min() > rcond * eig.max():
        return None
    sv = np.linalg.svd(J, compute_uv=False)
    rank = int(np.sum(sv > np.sqrt(rcond) * max(sv.max(initial=0), 1e-300)))
    if rank < constraints.m:
        return (f"the constraints {constraints.specs} are redundant or conflicting: J has rank {rank} < m = "
                f"{constraints.m} (J M⁻¹ Jᵀ eigenvalues {eig.min():.3g} .. {eig.max():.3g}), so the multipliers λ "
                f"are not unique (and no v̇ satisfies J v̇ + J̇ v = k unless k is consistent)")
    return (f"the constraints {constraints.specs} are ill-conditioned: J has full row rank but J M⁻¹ Jᵀ has "
            f"κ = {eig.max() / max(eig.min(), 1e-300 * eig.max()):.1e} (eigenvalues {eig.min():.3g} .. {eig.max():.3g}; a "
            f"very light or thin body), beyond the {1 / rcond:.0e} the dense KKT solve resolves")


def constrained_dynamics(robot, constraints, q, v, tau, k, K_inputs=None, redundant="raise", rcond=1e-10):
    """(v̇, λ) of M v̇ + c = τ + Jᵀ λ, J v̇ + J̇ v = k by a dense KKT solve
    [[M, −Jᵀ], [J, 0]] [v̇; λ] = [τ − c; k − J̇ v].

    Redundant constraints (J not of full row rank) raise ConstraintError; with
    ``redundant="lstsq"`` the least-squares KKT solution is returned instead (v̇ is unique when
    k is consistent; λ is the minimum-norm choice)."""
    M = mass_matrix(robot, q)
    J = constraint_jacobian(robot, constraints, q, K_inputs)
    b = np.asarray(tau, float).reshape(-1) - bias_forces(robot, q, v)
    rhs = np.asarray(k, float).reshape(-1) - constraint_drift(robot, constraints, q, v, K_inputs)
    m, n = J.shape
    A = np.block([[M, -J.T], [J, np.zeros((m, m))]])
    y = np.concatenate([b, rhs])
    msg = _redundancy(J, J @ np.linalg.solve(M, J.T), constraints, rcond)
    if msg is None:
        sol = np.linalg.solve(A, y)
    elif redundant == "lstsq":
        sol = np.linalg.lstsq(A, y, rcond=None)[0]
    else:
        raise ConstraintError(msg)
    return sol[:n], sol[n:]


def soft_dynamics(robot, constraints, q, v, tau, k, R, K_inputs=None):
    """(v̇, λ) of the soft Gauss principle (PV paper Sec. VI, eq. (50); MuJoCo's soft
    equality constraints):  v̇ = argmin ½‖v̇ − v̇_free‖²_M + ½ rᵀ R⁻¹ r,  r = J v̇ + J̇ v − k,
    i.e. (M + Jᵀ R⁻¹ J) v̇ = τ − c − Jᵀ R⁻¹ (J̇ v − k), and λ = −R⁻¹ r (so that again
    M v̇ + c = τ + Jᵀ λ).  R > 0 (m): the compliance of each row; always solvable."""
    M = mass_matrix(robot, q)
    J = constraint_jacobian(robot, constraints, q, K_inputs)
    Rinv = 1.0 / np.asarray(R, float).reshape(-1)
    drift = constraint_drift(robot, constraints, q, v, K_inputs)
    k = np.asarray(k, float).reshape(-1)
    A = M + J.T @ (Rinv[:, None] * J)
    b = np.asarray(tau, float).reshape(-1) - bias_forces(robot, q, v) - J.T @ (Rinv * (drift - k))
    vdot = np.linalg.solve(A, b)
    return vdot, -Rinv * (J @ vdot + drift - k)
