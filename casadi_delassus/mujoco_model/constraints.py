"""MuJoCo's constraint rows (efc_*) of one state over casadi.SX (MuJoCo's computation chapter,
"Constraint model" and "Soft constraints"; the method of engine_core_constraint.c's
mj_instantiate* functions, mj_diagApprox and mj_makeImpedance, written anew).

Rows come in MuJoCo's order: equality (active ones: connect 3 rows, weld 6, joint 1), friction
loss (one per dof with dof_frictionloss > 0), joint limits (per limited joint: a hinge's or
slide's lower then upper side, a ball's one row), contacts (in the given order).  Joint-limit
rows exist where dist < margin: every candidate row is traced with its ``active`` flag (SX),
and MuJoCo's efc arrays are the active rows, in order.

Per row: the Jacobian J (SX rows of nv), efc_pos, efc_margin, efc_frictionloss, efc_type, the
impedance d, R, D = 1/R, K and B (soft.py), and a_ref = −B (J v) − K d (pos − margin).  MuJoCo's
approximation â of A's diagonal (mj_diagApprox) takes model constants: body_invweight0 of the
bodies (translation for connect and contact rows, rotation for a weld's last three and the
elliptic cone's torsional and rolling rows) and dof_invweight0 of the dofs.  Rows that share
one impedance: a connect's 3 and a weld's 6 (of ‖pos‖ over them), a contact's (of its dist).
Friction rows (friction loss, the elliptic cone's beyond the normal) have K = 0; the elliptic
cone's take B from solreffriction where it is not zero; its friction rows' R is R₀/impratio ·
μ₁²/μ_j² and a pyramid's edges all 2 μ² R₀ with μ² = μ₁² R₁/R₀ (R₁ = R₀/impratio).

Contacts are given (``Contact``: bodies, point, frame, dist, condim, friction, solref,
solreffriction, solimp, includemargin) — from MuJoCo's data.contact for now, from
collision.py's candidates later: point, frame and dist may be SX.  A contact's rows act on
v(body 2) − v(body 1) at its point: the frame's first condim rows (normal, tangents) on the
linear velocity, then (condim 4, 6) the first condim − 3 on the angular one; a pyramid's edges
are n ± μ_j e_j."""
from __future__ import annotations

from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from ..model.mjcf import mujoco_module
from . import soft
from .flags import disabled
from .kinematics import BALL, HINGE, SLIDE, Kinematics, quat_conj, quat_mul, quat_to_vel

EQUALITY, FRICTION_DOF, LIMIT_JOINT, FRICTIONLESS, PYRAMIDAL, ELLIPTIC = 0, 1, 3, 5, 6, 7


@dataclass
class Contact:
    """One contact as MuJoCo's constraint rows read it (its mjContact's fields)."""
    body1: int
    body2: int
    pos: object                 # world point (3; numbers or SX)
    frame: object               # rows normal, tangent 1, tangent 2 (3 x 3; numbers or SX)
    dist: object
    dim: int
    friction: tuple             # 5 (tangential, tangential, torsional, rolling, rolling)
    solref: tuple
    solreffriction: tuple
    solimp: tuple
    includemargin: float

    def static(self):
        """The numbers that shape its rows (a compiled function's signature)."""
        return (self.body1, self.body2, self.dim, *map(float, self.friction), *map(float, self.solref),
                *map(float, self.solreffriction), *map(float, self.solimp), float(self.includemargin))


def contacts_from_data(m, d):
    """The Contacts of MjData ``d``'s included contacts (exclude = 0), in order."""
    out = []
    for i in range(d.ncon):
        c = d.contact[i]
        if c.exclude:
            continue
        out.append(Contact(int(m.geom_bodyid[c.geom[0]]), int(m.geom_bodyid[c.geom[1]]), np.array(c.pos),
                           np.array(c.frame).reshape(3, 3), float(c.dist), int(c.dim), tuple(c.friction),
                           tuple(c.solref), tuple(c.solreffriction), tuple(c.solimp), float(c.includemargin)))
    return out


@dataclass
class Rows:
    """Constraint rows as SX, MuJoCo's order; ``active`` (SX 0/1) marks the rows MuJoCo has."""
    J: list = field(default_factory=list)            # 1 x nv SX each
    pos: list = field(default_factory=list)
    margin: list = field(default_factory=list)
    frictionloss: list = field(default_factory=list)
    type: list = field(default_factory=list)
    id: list = field(default_factory=list)
    active: list = field(default_factory=list)
    weight: list = field(default_factory=list)       # â
    imp: list = field(default_factory=list)
    K: list = field(default_factory=list)
    B: list = field(default_factory=list)
    R: list = field(default_factory=list)
    drift: list = field(default_factory=list)        # J̇ v where MuJoCo's a_ref takes it (connect, weld)

    def add(self, J, pos, margin, kind, ident, weight, imp, K, B, R, frictionloss=0.0, active=1, drift=0.0):
        for name, value in (("J", J), ("pos", pos), ("margin", margin), ("type", kind), ("id", ident),
                            ("weight", weight), ("imp", imp), ("K", K), ("B", B), ("R", R),
                            ("frictionloss", frictionloss), ("active", active), ("drift", drift)):
            getattr(self, name).append(value)

    def __len__(self):
        return len(self.J)

    def aref(self, v):
        """a_ref = −B (J v) − K d (pos − margin) − J̇ v per row (SX column)."""
        return ca.vertcat(*[-B * ca.mtimes(J, v) - K * imp * (p - mg) - dr for J, B, K, imp, p, mg, dr
                            in zip(self.J, self.B, self.K, self.imp, self.pos, self.margin, self.drift)])

    def matrix(self):
        return ca.vertcat(*self.J) if self.J else ca.SX(0, 1)


def _solparams(m, solref, solimp, default=soft.DEFAULT_SOLREF):
    """(cleaned solref, cleaned solimp, K, B) under m.opt."""
    ref = soft.clean_solref(solref, m.opt.timestep, not disabled(m, "refsafe"), default)
    imp = soft.clean_solimp(solimp)
    return (ref, imp, *soft.stiffness_damping(ref, imp))


def _row(nv, entries):
    """A 1 x nv SX row with {dof: value}."""
    J = ca.SX(1, nv)
    for d, x in entries.items():
        J[0, d] = x
    return J


def _body_of(m, objtype, i):
    mujoco = mujoco_module()
    return int(m.site_bodyid[i]) if int(objtype) == int(mujoco.mjtObj.mjOBJ_SITE) else int(i)


def _structurally_zero(kin, *bodies):
    return not any(kin.chain[b] for b in bodies)


def equality_rows(kin, rows, v):
    """The active (eq_active0) connect, weld and joint equality rows; a connect's and a weld's
    carry J̇ v (qvel ``v``), which MuJoCo 4's a_ref subtracts (measured: its efc_aref minus
    −B·vel − K·d·(pos − margin) is −J̇ v on exactly these rows)."""
    m = kin.m
    mujoco = mujoco_module()
    eq = mujoco.mjtEq
    if disabled(m, "equality"):
        return
    for e in range(m.neq):
        if not m.eq_active0[e]:
            continue
        kind, data = int(m.eq_type[e]), m.eq_data[e]
        ref, imp_par, K, B = _solparams(m, m.eq_solref[e], m.eq_solimp[e])
        if kind in (int(eq.mjEQ_CONNECT), int(eq.mjEQ_WELD)):
            b = [_body_of(m, m.eq_objtype[e], i) for i in (m.eq_obj1id[e], m.eq_obj2id[e])]
            if _structurally_zero(kin, *b):
                continue
            J, pos, weights, drift = (_connect if kind == int(eq.mjEQ_CONNECT) else _weld)(kin, e, b, v)
            imp = soft.impedance(ca.norm_2(ca.vertcat(*pos)), imp_par)
            for Jr, p, w, dr in zip(J, pos, weights, drift):
                rows.add(Jr, p, 0.0, EQUALITY, e, w, imp, K, B, soft.regularization(imp, w), drift=dr)
        elif kind == int(eq.mjEQ_JOINT):
            J, pos, w = _joint_equality(kin, e, data)
            imp = soft.impedance(pos, imp_par)
            rows.add(J, pos, 0.0, EQUALITY, e, w, imp, K, B, soft.regularization(imp, w))


def _ends(kin, e, b, anchors):
    """The two world points of a connect or weld: body anchors, or the sites' positions."""
    m = kin.m
    if int(m.eq_objtype[e]) == int(mujoco_module().mjtObj.mjOBJ_SITE):
        return [kin.frame("site", int(i))[0] for i in (m.eq_obj1id[e], m.eq_obj2id[e])]
    return [kin.xpos[bj] + ca.mtimes(kin.xmat[bj], ca.DM(a)) for bj, a in zip(b, anchors)]


def _translation_rows(kin, b, points, v):
    """Jacobian rows of points[0] on body b[0] minus points[1] on body b[1], the position error,
    and J̇ v: the points' relative acceleration at zero joint acceleration."""
    (J0, R0), (J1, R1) = kin.jacobian(b[0], points[0]), kin.jacobian(b[1], points[1])
    cpos = points[0] - points[1]
    zero = ca.SX.zeros(kin.m.nv, 1)
    drift = kin.point_acceleration(b[0], points[0], v, zero)[0] - kin.point_acceleration(b[1], points[1], v, zero)[0]
    return J0 - J1, R0 - R1, [cpos[k] for k in range(3)], [drift[k] for k in range(3)]


def _connect(kin, e, b, v):
    m = kin.m
    data = m.eq_data[e]
    Jp, _, pos, drift = _translation_rows(kin, b, _ends(kin, e, b, (data[0:3], data[3:6])), v)
    w = float(m.body_invweight0[b[0], 0] + m.body_invweight0[b[1], 0])
    return [Jp[k, :] for k in range(3)], pos, [w] * 3, drift


def _weld(kin, e, b, v):
    """A weld's rows: its anchors' difference (body 1's anchor data[3:6], body 2's data[0:3]) and
    the rotation error vec(q₂⁻¹ q₁ relpose) · torquescale with its Jacobian ½ vec(q₂⁻¹ (ω₁ − ω₂) q₁ relpose);
    J̇ v of the rotation rows differentiates that with q̇ᵢ = ½ ωᵢ qᵢ (world ω) and ω̇ at zero acceleration."""
    m = kin.m
    data = m.eq_data[e]
    Jp, Jr, pos, drift = _translation_rows(kin, b, _ends(kin, e, b, (data[3:6], data[0:3])), v)
    scale = float(data[10])
    if int(m.eq_objtype[e]) == int(mujoco_module().mjtObj.mjOBJ_SITE):
        q1 = kin.frame("site", int(m.eq_obj1id[e]))[1]
        q2 = kin.frame("site", int(m.eq_obj2id[e]))[1]
    else:
        q1, q2 = quat_mul(kin.xquat[b[0]], ca.DM(data[6:10])), kin.xquat[b[1]]
    q2n = quat_conj(q2)
    err = quat_mul(q2n, q1)
    rot = ca.SX(3, m.nv)
    for d in sorted(set(kin.chain[b[0]]) | set(kin.chain[b[1]])):
        t = quat_mul(quat_mul(q2n, ca.vertcat(0, Jr[:, d])), q1)
        rot[:, d] = 0.5 * t[1:4] * scale
    wt = float(m.body_invweight0[b[0], 0] + m.body_invweight0[b[1], 0])
    wr = float(m.body_invweight0[b[0], 1] + m.body_invweight0[b[1], 1])
    return ([Jp[k, :] for k in range(3)] + [rot[k, :] for k in range(3)],
            pos + [err[1 + k] * scale for k in range(3)], [wt] * 3 + [wr] * 3,
            drift + _weld_rotation_drift(kin, b, q1, q2n, v, scale))


def _weld_rotation_drift(kin, b, q1, q2n, v, scale):
    """d/dt ½ s vec(q₂⁻¹ W q₁) at fixed v: W = (0, ω₁ − ω₂), q̇₁ = ½ Ω₁ q₁, (q₂⁻¹)˙ = −½ q₂⁻¹ Ω₂."""
    zero = ca.SX.zeros(kin.m.nv, 1)
    w1, w2 = kin.twist(b[0], v)[0], kin.twist(b[1], v)[0]
    dw = kin.spatial_acceleration(b[0], v, zero)[0] - kin.spatial_acceleration(b[1], v, zero)[0]
    pure = lambda x: ca.vertcat(0, x)       # noqa: E731 -- a vector as a pure quaternion
    W = pure(w1 - w2)
    terms = (-0.5 * quat_mul(quat_mul(quat_mul(q2n, pure(w2)), W), q1) + quat_mul(quat_mul(q2n, pure(dw)), q1)
             + 0.5 * quat_mul(quat_mul(q2n, W), quat_mul(pure(w1), q1)))
    return [0.5 * scale * terms[1 + k] for k in range(3)]


def _joint_equality(kin, e, data):
    """q₁ − ref₁ − (c₀ + c₁ δ + c₂ δ² + c₃ δ³ + c₄ δ⁴), δ = q₂ − ref₂ (or q₁ − ref₁ − c₀ alone)."""
    m, q = kin.m, kin.q
    j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
    a1, d1 = int(m.jnt_qposadr[j1]), int(m.jnt_dofadr[j1])
    w = float(m.dof_invweight0[d1])
    if j2 < 0:
        return _row(m.nv, {d1: 1.0}), q[a1] - float(m.qpos0[a1]) - float(data[0]), w
    a2, d2 = int(m.jnt_qposadr[j2]), int(m.jnt_dofadr[j2])
    dif = q[a2] - float(m.qpos0[a2])
    c = [float(x) for x in data[:5]]
    pos = q[a1] - float(m.qpos0[a1]) - c[0] - (c[1] * dif + c[2] * dif ** 2 + c[3] * dif ** 3 + c[4] * dif ** 4)
    deriv = c[1] + 2 * c[2] * dif + 3 * c[3] * dif ** 2 + 4 * c[4] * dif ** 3
    J = _row(m.nv, {d1: 1.0})
    J[0, d2] = J[0, d2] - deriv
    return J, pos, w + float(m.dof_invweight0[d2])


def friction_rows(m, rows):
    """One row per dof with friction loss: J = e_dof, pos = margin = 0, K = 0."""
    if disabled(m, "frictionloss"):
        return
    for d in range(m.nv):
        fl = float(m.dof_frictionloss[d])
        if fl <= 0:
            continue
        _, imp_par, _, B = _solparams(m, m.dof_solref[d], m.dof_solimp[d])
        w = float(m.dof_invweight0[d])
        imp = soft.impedance(0.0, imp_par)
        rows.add(_row(m.nv, {d: 1.0}), 0.0, 0.0, FRICTION_DOF, d, w, imp, 0.0, B, soft.regularization(imp, w), fl)


def limit_rows(kin, rows):
    """Joint-limit rows of limited hinge, slide (lower, upper) and ball joints, active where dist < margin."""
    m, q = kin.m, kin.q
    if disabled(m, "limit"):
        return
    for j in range(m.njnt):
        if not m.jnt_limited[j]:
            continue
        kind, a, d = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        margin = float(m.jnt_margin[j])
        _, imp_par, K, B = _solparams(m, m.jnt_solref[j], m.jnt_solimp[j])
        w = float(m.dof_invweight0[d])
        if kind in (HINGE, SLIDE):
            for side, bound in ((-1, m.jnt_range[j, 0]), (1, m.jnt_range[j, 1])):
                dist = side * (float(bound) - q[a])
                imp = soft.impedance(dist - margin, imp_par)
                rows.add(_row(m.nv, {d: -float(side)}), dist, margin, LIMIT_JOINT, j, w, imp, K, B,
                         soft.regularization(imp, w), active=dist < margin)
        elif kind == BALL:
            turn = quat_to_vel(q[a:a + 4])
            angle = ca.norm_2(turn)
            axis = turn / ca.fmax(angle, soft.MINVAL)
            dist = float(max(m.jnt_range[j])) - angle
            imp = soft.impedance(dist - margin, imp_par)
            rows.add(_row(m.nv, {d + k: -axis[k] for k in range(3)}), dist, margin, LIMIT_JOINT, j, w, imp, K, B,
                     soft.regularization(imp, w), active=dist < margin)


def contact_rows(kin, contacts, rows, first_id=0):
    """The rows of ``contacts`` (their ids counted from ``first_id``), under m.opt's cone and impratio."""
    m = kin.m
    if disabled(m, "contact"):
        return
    pyramidal = int(m.opt.cone) == int(mujoco_module().mjtCone.mjCONE_PYRAMIDAL)
    for i, c in enumerate(contacts):
        if _structurally_zero(kin, c.body1, c.body2):
            continue
        for J, pos, margin, kind, weight, imp, K, B, R in contact_parameters(m, c, pyramidal, _contact_jacobian(kin, c)):
            rows.add(J, pos, margin, kind, first_id + i, weight, imp, K, B, R)


def _contact_jacobian(kin, c):
    """The contact frame's rows (dim of them) on v(body 2) − v(body 1) at the contact point."""
    point = c.pos if isinstance(c.pos, ca.SX) else ca.DM(np.asarray(c.pos, float))
    frame = c.frame if isinstance(c.frame, ca.SX) else ca.DM(np.asarray(c.frame, float).reshape(3, 3))
    (J1, R1), (J2, R2) = kin.jacobian(c.body1, point), kin.jacobian(c.body2, point)
    lin = ca.mtimes(frame, J2 - J1)
    out = [lin[k, :] for k in range(min(c.dim, 3))]
    if c.dim > 3:
        ang = ca.mtimes(frame, R2 - R1)
        out += [ang[k, :] for k in range(c.dim - 3)]
    return out


def contact_parameters(m, c, pyramidal, J):
    """The rows of contact ``c`` given its frame rows J (condim of them): per row
    (J, pos, margin, type, weight, imp, K, B, R)."""
    tran = float(m.body_invweight0[c.body1, 0] + m.body_invweight0[c.body2, 0])
    rot = float(m.body_invweight0[c.body1, 1] + m.body_invweight0[c.body2, 1])
    rows = contact_soft(c, tran, rot, float(m.opt.impratio), float(m.opt.timestep), not disabled(m, "refsafe"), pyramidal)
    if c.dim > 1 and pyramidal:
        J = [J[0] + sign * float(c.friction[k - 1]) * J[k] for k in range(1, c.dim) for sign in (1.0, -1.0)]
    return [(Jr, *row) for Jr, row in zip(J, rows)]


def contact_soft(c, tran, rot, impratio, timestep, refsafe, pyramidal):
    """The soft parameters of contact ``c``'s rows (MuJoCo's order: the normal and the cone's
    rows, or the pyramid's edges), per row (pos, margin, type, weight, imp, K, B, R), for the
    translational and rotational approximate inverse weights ``tran``, ``rot`` of its bodies."""
    solref = soft.clean_solref(c.solref, timestep, refsafe)
    imp_par = soft.clean_solimp(c.solimp)
    K, B = soft.stiffness_damping(solref, imp_par)
    imp = soft.impedance(c.dist - c.includemargin, imp_par)
    mu = [float(x) for x in c.friction]
    ratio = max(soft.MINVAL, impratio)
    if c.dim == 1:
        return [(c.dist, c.includemargin, FRICTIONLESS, tran, imp, K, B, soft.regularization(imp, tran))]
    if pyramidal:
        weight = tran + mu[0] * mu[0] * tran
        R0 = soft.regularization(imp, weight)
        R1 = R0 / ratio
        mu_reg = mu[0] * (ca.sqrt(R1 / R0) if isinstance(R0, ca.SX) else np.sqrt(R1 / R0))
        row = (c.dist, c.includemargin, PYRAMIDAL, weight, imp, K, B, 2 * mu_reg * mu_reg * R0)
        return [row] * (2 * (c.dim - 1))
    own = any(float(x) != 0 for x in c.solreffriction)
    Bf = soft.stiffness_damping(soft.clean_solref(c.solreffriction, timestep, refsafe, (0.0, 0.0)), imp_par)[1] if own else B
    R0 = soft.regularization(imp, tran)
    R1 = R0 / ratio
    out = [(c.dist, c.includemargin, ELLIPTIC, tran, imp, K, B, R0)]
    for k in range(1, c.dim):
        Rk = R1 if k == 1 else R1 * mu[0] * mu[0] / (mu[k - 1] * mu[k - 1])
        out.append((0.0, 0.0, ELLIPTIC, tran if k < 3 else rot, imp, 0.0, Bf, Rk))
    return out


def constraint_rows(kin, v, contacts=()):
    """Every row of the state (Rows), MuJoCo's order, at qvel ``v`` (SX)."""
    rows = Rows()
    if disabled(kin.m, "constraint"):
        return rows
    equality_rows(kin, rows, v)
    friction_rows(kin.m, rows)
    limit_rows(kin, rows)
    contact_rows(kin, contacts, rows)
    return rows


def _column(values):
    """An SX column of numbers and SX scalars (empty: 0 x 1)."""
    return ca.vertcat(*[x if isinstance(x, ca.SX) else ca.SX(x) for x in values]) if values else ca.SX(0, 1)


def symbolic_contacts(contacts):
    """Copies of ``contacts`` whose point, frame and dist are SX symbols, and those symbols
    (pos: 3 n, frame: 9 n row-major, dist: n) — a compiled function's contact inputs."""
    n = len(contacts)
    pos, frame, dist = ca.SX.sym("contact_pos", 3 * n), ca.SX.sym("contact_frame", 9 * n), ca.SX.sym("contact_dist", n)
    out = [Contact(c.body1, c.body2, pos[3 * i:3 * i + 3], ca.reshape(frame[9 * i:9 * i + 9], 3, 3).T, dist[i], c.dim,
                   c.friction, c.solref, c.solreffriction, c.solimp, c.includemargin) for i, c in enumerate(contacts)]
    return out, (pos, frame, dist)


class EfcFunction:
    """The rows of model m with contacts shaped like ``contacts`` (their static data) as a
    casadi.Function of (qpos, qvel, contact pos, frame, dist): J, pos, margin, frictionloss, R, D,
    aref, active; ``type`` and ``id`` per row are known when it is built."""

    OUTPUTS = ("J", "pos", "margin", "frictionloss", "R", "D", "aref", "active", "K", "B", "imp")

    def __init__(self, m, contacts=()):
        q, v = ca.SX.sym("qpos", m.nq), ca.SX.sym("qvel", m.nv)
        symbolic, (cp, cf, cd) = symbolic_contacts(list(contacts))
        rows = constraint_rows(Kinematics(m, q), v, symbolic)
        self.type, self.id = np.array(rows.type, int), np.array(rows.id, int)
        col = _column
        R = col(rows.R)
        outputs = [ca.densify(rows.matrix()) if len(rows) else ca.SX(0, m.nv), col(rows.pos), col(rows.margin),
                   col(rows.frictionloss), R, 1 / R, rows.aref(v) if len(rows) else ca.SX(0, 1), col(rows.active),
                   col(rows.K), col(rows.B), col(rows.imp)]
        self.function = ca.Function("efc", [q, v, cp, cf, cd], outputs, ["qpos", "qvel", "contact_pos", "contact_frame",
                                                                          "contact_dist"], list(self.OUTPUTS))

    def __call__(self, qpos, qvel, contacts=()):
        """{name: NumPy array} of the active rows, for numeric contacts like the built ones."""
        pos = np.concatenate([np.ravel(c.pos) for c in contacts]) if contacts else np.zeros(0)
        frame = np.concatenate([np.ravel(c.frame) for c in contacts]) if contacts else np.zeros(0)
        dist = np.array([c.dist for c in contacts], float)
        out = {k: np.array(x) for k, x in zip(self.OUTPUTS, self.function(qpos, qvel, pos, frame, dist))}
        keep = out["active"].ravel() > 0.5
        res = {k: (x[keep] if k == "J" else x.ravel()[keep]) for k, x in out.items()}
        res["type"], res["id"] = self.type[keep], self.id[keep]
        return res
