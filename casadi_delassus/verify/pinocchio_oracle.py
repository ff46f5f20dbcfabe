"""Pinocchio as a second, external oracle for models and constraints it can represent.

Pinocchio's ``computeDelassusMatrix`` ignores the second link of a link-to-link constraint;
its ``ConstraintCholeskyDecomposition`` does not, so the Delassus operator, with or without
damping, is taken from ``getDelassusOperatorCholeskyExpression()`` (``@`` and ``.solve``).
Needs the ``pin`` package (the ``test`` and ``bench`` extras)."""
from __future__ import annotations

import re

import numpy as np

from ..errors import DelassusError
from .check import NotApplicable

# LINK:6d or LINK:3d[@x,y,z]: the constraints Pinocchio's computeDelassusMatrix and
# constraintDynamics take on a frame found by name
_FRAME_SPEC = re.compile(r"^(?P<link>[^:@]+):(?P<kind>6d|3d)(?:@(?P<offset>[^@]+))?$")


def frame_spec(spec):
    """(kind, link, offset 3-list) of a ``LINK:6d`` / ``LINK:3d[@x,y,z]`` spec, or None."""
    m = _FRAME_SPEC.match(spec.strip())
    if m is None:
        return None
    return m["kind"], m["link"], [float(x) for x in m["offset"].split(",")] if m["offset"] else [0.0, 0.0, 0.0]


def _pin():
    try:
        import pinocchio
    except ImportError as e:
        raise DelassusError("the Pinocchio oracle needs the 'pin' package (pip install pin)") from e
    return pinocchio


def model_from_robot(robot):
    """A pinocchio.Model built from our Robot: joints in our order (body i is joint i + 1),
    body frames as ours, armature as ours, so v is laid out alike and q too where the
    quaternions are Pinocchio's (``pinocchio_q`` converts MuJoCo's).  For models Pinocchio cannot
    read itself (SDF, synthetic mechanisms, spatial_v2 JSON, ball joints)."""
    pin = _pin()
    model = pin.Model()
    for b in robot.bodies:
        kind = b.joint.kind
        jm = {"free": lambda ax: pin.JointModelFreeFlyer(),
              "ball": lambda ax: pin.JointModelSpherical(),
              "revolute": pin.JointModelRevoluteUnaligned,
              "continuous": _unbounded_revolute,
              "prismatic": pin.JointModelPrismaticUnaligned}[kind](b.joint.axis)
        j = model.addJoint(b.parent + 1, jm, pin.SE3(b.rotation.T, b.translation), b.joint.name)
        model.appendBodyToJoint(j, pin.Inertia(b.mass, b.com, b.inertia), pin.SE3.Identity())
    model.armature = np.array(robot.armature, float)
    return model


def _unbounded_revolute(axis):
    """Pinocchio's continuous joint about ``axis``: its Python binding builds the unaligned one
    without an axis only, so the axis must be +x, +y or +z."""
    pin = _pin()
    for k, joint in enumerate((pin.JointModelRUBX, pin.JointModelRUBY, pin.JointModelRUBZ)):
        if np.array_equal(axis, np.eye(3)[k]):
            return joint()
    raise DelassusError(f"the Pinocchio oracle builds continuous joints about +x, +y or +z only, not {list(axis)}")


def model_for(robot):
    """Pinocchio's own URDF parse where the robot is a URDF file (the independent path; the
    robot's armature set on it), else ``model_from_robot``."""
    pin = _pin()
    src = str(getattr(robot, "source", "") or "")
    if src.endswith(".urdf"):
        model = (pin.buildModelFromUrdf(src, pin.JointModelFreeFlyer()) if robot.floating_base
                 else pin.buildModelFromUrdf(src))
        model.armature = np.array(robot.armature, float)
        return model
    return model_from_robot(robot)


def pinocchio_q(robot, q):
    """q in Pinocchio's layout: the quaternions of joints stored w first (MuJoCo's qpos) moved to
    x, y, z, w.  (v is Pinocchio's only where every free joint has local velocities.)"""
    q = np.array(q, dtype=float)
    for b in robot.bodies:
        k = b.joint.quaternion_start
        if k is not None and b.joint.quaternion == "wxyz":
            s = b.q_index + k
            q[s:s + 4] = np.roll(q[s:s + 4], -1)
    return q


def point_a(c):
    """a of LINK:3d@a or A|B:3d@a;b from K_frame = [1, −a×]."""
    ax = -c.K_frame[:3, 3:]
    return np.array([ax[2, 1], ax[0, 2], ax[1, 0]])


def constraint_model(model, robot, c):
    """RigidConstraintModel (LOCAL) of a 6d/3d constraint to the world or between links A|B.
    Body i of our Robot is joint i + 1 in ``model`` (true for both builders above: Pinocchio
    orders URDF joints depth-first, as we do)."""
    pin = _pin()
    if c.kind not in ("6d", "3d"):
        raise DelassusError(f"Pinocchio has no rigid constraint for {c.spec!r}")
    A = robot.frame(c.link)
    a = point_a(c) if c.kind == "3d" else np.zeros(3)
    ct = pin.ContactType.CONTACT_3D if c.kind == "3d" else pin.ContactType.CONTACT_6D
    placement = pin.SE3(A.rotation, A.translation + A.rotation @ a)
    if c.body2 is None:
        return pin.RigidConstraintModel(ct, model, c.body + 1, placement, pin.ReferenceFrame.LOCAL)
    return pin.RigidConstraintModel(ct, model, c.body + 1, placement, c.body2 + 1, pin.SE3(np.eye(3), c.point2),
                                    pin.ReferenceFrame.LOCAL)


def constraint_models(model, robot, constraints):
    pin = _pin()
    cms = pin.StdVec_RigidConstraintModel()
    for c in constraints.constraints:
        cms.append(constraint_model(model, robot, c))
    return cms


def delassus_expression(model, data, cms, q, damping):
    """(Pinocchio's Cholesky Delassus expression at q with ``damping`` (scalar or per row) added
    to the diagonal, the constraint datas)."""
    pin = _pin()
    cds = pin.StdVec_RigidConstraintData()
    for cm in cms:
        cds.append(cm.createData())
    pin.computeJointJacobians(model, data, q)
    pin.crba(model, data, q)
    for cm, cd in zip(cms, cds):
        cm.calc(model, data, cd)
    chol = pin.ConstraintCholeskyDecomposition(model, data, cms, cds)
    chol.compute(model, data, cms, cds, damping)
    return chol.getDelassusOperatorCholeskyExpression(), cds


def frame_constraint_models(model, specs):
    """RigidConstraintModels (LOCAL) for ``LINK:6d`` / ``LINK:3d[@x,y,z]`` specs placed on
    Pinocchio's own frames, found by name (a BODY frame first): independent of our frame data.
    None when a spec is of another kind (Pinocchio's constraintDynamics has no equivalent) or
    the model has no frame of that name (model_from_robot adds none)."""
    pin = _pin()
    cms = pin.StdVec_RigidConstraintModel()
    for spec in specs:
        parsed = frame_spec(spec)
        if parsed is None:
            return None
        kind, link, p = parsed
        if not model.existFrame(link):
            return None
        fid = model.getFrameId(link, pin.FrameType.BODY) if model.existFrame(link, pin.FrameType.BODY) \
            else model.getFrameId(link)
        frame = model.frames[fid]
        ct = pin.ContactType.CONTACT_6D if kind == "6d" else pin.ContactType.CONTACT_3D
        cms.append(pin.RigidConstraintModel(ct, model, frame.parentJoint, frame.placement * pin.SE3(np.eye(3), np.array(p)),
                                            pin.ReferenceFrame.LOCAL))
    return cms


def zero_acceleration_k(model, data, cms, q, v):
    """Our desired constraint accelerations k for Pinocchio's constraintDynamics problem (zero
    LOCAL acceleration of each contact, no Baumgarte terms): 0 for a 6D weld (spatial
    acceleration); −ω × v_p for a 3D point, since Pinocchio constrains the point's classical
    acceleration a_p + ω × v_p while our rows are its spatial one."""
    pin = _pin()
    pin.forwardKinematics(model, data, q, v)
    k = []
    for cm in cms:
        if cm.type == pin.ContactType.CONTACT_6D:
            k += [0.0] * 6
        else:
            vel = cm.joint1_placement.actInv(data.v[cm.joint1_id])
            k += list(-np.cross(vel.angular, vel.linear))
    return np.array(k)


# -- the oracle of ``check --oracle pinocchio`` (verify/oracles.py) ----------------------------------
OWN_PARSE_FORMATS = ("urdf",)


def unsupported(robot):
    """None when Pinocchio can model ``robot`` with our q layout, else why not."""
    if getattr(robot, "model_format", None) == "mjcf":
        return "an MJCF model takes MuJoCo's qpos (quaternions w, x, y, z): use the mujoco oracle"
    kinds = sorted({b.joint.kind for b in robot.bodies} - {"free", "revolute", "continuous", "prismatic"})
    if kinds:
        return f"no Pinocchio joint model here for joint type(s) {', '.join(kinds)}"
    return None


def _model_format(robot):
    fmt = getattr(robot, "model_format", None)
    return fmt or ("urdf" if str(getattr(robot, "source", "") or "").lower().endswith(".urdf") else None)


def own_model(robot):
    """(pinocchio.Model, note): Pinocchio's own parse of the URDF the robot was read from (a
    file, or the text of ``load_robot(text)``), on a free flyer when ours floats; for any other
    format the model built from our parse (``model_from_robot``, frames included), which shares
    our reading of the file: the note says so."""
    pin = _pin()
    if _model_format(robot) in OWN_PARSE_FORMATS:
        text = getattr(robot, "model_text", None)
        root = [pin.JointModelFreeFlyer()] if robot.floating_base else []
        if text is not None:
            return pin.buildModelFromXML(text, *root), "Pinocchio's own parse of the URDF text"
        path = str(getattr(robot, "model_file", None) or robot.source)
        return pin.buildModelFromUrdf(path, *root), f"Pinocchio's own parse of {path}"
    model = model_from_robot(robot)
    for f in robot.frames.values():
        model.addFrame(pin.Frame(f.name, f.body + 1, pin.SE3(f.rotation, f.translation), pin.FrameType.OP_FRAME))
    model.gravity.linear = np.asarray(robot.gravity, float)
    return model, (f"model built from our parse ({_model_format(robot) or 'a Robot object'}): it checks the "
                   f"algorithms, not how the model file was read")


def _frame_id(model, name):
    pin = _pin()
    if model.existFrame(name, pin.FrameType.BODY):
        return model.getFrameId(name, pin.FrameType.BODY)
    if model.existFrame(name):
        return model.getFrameId(name)
    return None


_LOCAL_KINDS = ("6d", "3d")
_WORLD_KINDS = ("6d-world", "3d-world")


class PinocchioSession:
    """Pinocchio's answers for one robot and constraint set (see verify/oracles.py).  Constraint
    rows come from Pinocchio's own frames, found by name, with a frame added at each offset
    point: LOCAL / LOCAL_WORLD_ALIGNED frame Jacobians, J̇v from its frame accelerations at
    v̇ = 0 (spatial for local rows, classical for world-aligned ones), 𝒦 rows at its joints'
    velocity indices for JOINT:NAME.  Λ⁻¹ is computeDelassusMatrix where every constraint is a
    local 6d/3d one, J M⁻¹ Jᵀ with its crba otherwise; hard dynamics are constraintDynamics
    where every constraint is 6d/3d (local or world-aligned), with k set to its zero
    constraint acceleration (``zero_acceleration_k``), otherwise the KKT system of its M, nle,
    J and J̇v; soft dynamics that system with compliance; aba and rnea its own."""

    def __init__(self, robot, constraints):
        pin = _pin()
        self.robot, self.cs = robot, constraints
        self.model, note = own_model(robot)
        self.notes = [note]
        if (self.model.nq, self.model.nv) != (robot.nq, robot.nv):
            raise DelassusError(f"Pinocchio's model of {robot.name!r} has nq {self.model.nq}, nv {self.model.nv}; "
                                f"ours has nq {robot.nq}, nv {robot.nv}: the two parses differ")
        armature = np.asarray(getattr(robot, "armature", None) if getattr(robot, "armature", None) is not None
                              else np.zeros(robot.nv), float)
        if np.any(armature):
            self.model.armature = np.broadcast_to(armature, (robot.nv,)).copy()
            self.notes.append("armature: ours, set on Pinocchio's model")
        self.missing = None
        self.rows = [self._rows(c) for c in constraints.constraints]
        self.data = self.model.createData()
        self.contacts = self._contact_models()
        self._x = self._cache = None

    # -- the rows ------------------------------------------------------------------------------
    def _point_frame(self, fid, point, name):
        """A frame at ``point`` (coordinates of frame ``fid``) with ``fid``'s axes."""
        pin = _pin()
        f = self.model.frames[fid]
        return self.model.addFrame(pin.Frame(name, f.parentJoint, fid, f.placement * pin.SE3(np.eye(3), np.asarray(point)),
                                             pin.FrameType.OP_FRAME))

    def _find(self, name):
        fid = _frame_id(self.model, name)
        if fid is None and self.missing is None:
            self.missing = f"Pinocchio's model has no frame named {name!r}"
        return fid

    def _rows(self, c):
        """What each constraint reads: ("frame", fid), ("point", fid) or ("joint", v slice), and
        for A|B the second frame (and points)."""
        if c.joint:
            jid = self.model.getJointId(c.joint) if self.model.existJointName(c.joint) else None
            if jid is None:
                self.missing = self.missing or f"Pinocchio's model has no joint named {c.joint!r}"
                return ("joint", None)
            j = self.model.joints[jid]
            return ("joint", slice(j.idx_v, j.idx_v + j.nv))
        fid = self._find(c.link)
        if fid is None:
            return ("none", None)
        n = len(self.model.frames)
        if c.body2 is None:
            if c.kind in ("3d", "3d-world"):
                return ("point", self._point_frame(fid, point_a(c), f"cd_point_{n}"))
            return ("frame", fid)
        fid2 = self._find(c.link2)
        if fid2 is None:
            return ("none", None)
        if c.kind == "6d":
            return ("pair6", fid, fid2)
        b = self.robot.frame(c.link2)
        # c.point2 is b in B's body coordinates; in B's frame coordinates: Fᵀ (point2 − origin)
        b_local = b.rotation.T @ (c.point2 - b.translation)
        return ("pair3", self._point_frame(fid, point_a(c), f"cd_point_{n}"),
                self._point_frame(fid2, b_local, f"cd_point_{n + 1}"))

    def _contact_models(self):
        """RigidConstraintModels for constraintDynamics (and computeDelassusMatrix when all are
        LOCAL), or None when a constraint has no rigid-contact counterpart."""
        pin = _pin()
        if self.missing or not all(c.unary and c.kind in _LOCAL_KINDS + _WORLD_KINDS for c in self.cs.constraints):
            return None
        cms = pin.StdVec_RigidConstraintModel()
        for c, row in zip(self.cs.constraints, self.rows):
            f = self.model.frames[row[1]]
            ct = pin.ContactType.CONTACT_6D if c.rows == 6 else pin.ContactType.CONTACT_3D
            ref = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED if c.world else pin.ReferenceFrame.LOCAL
            cms.append(pin.RigidConstraintModel(ct, self.model, f.parentJoint, f.placement, ref))
        return cms

    # -- one sample ----------------------------------------------------------------------------
    def _sample(self, x):
        """Pinocchio's M, J, J̇v (None where it has none) and nle at the sample ``x`` (cached)."""
        if self._x is x:
            return self._cache
        pin = _pin()
        model, data, q = self.model, self.data, x["q"]
        v = x.get("v", np.zeros(model.nv))
        pin.computeJointJacobians(model, data, q)
        pin.forwardKinematics(model, data, q, v, np.zeros(model.nv))      # data.a: the bias accelerations
        pin.updateFramePlacements(model, data)
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        J, drift = [], []
        for c, row in zip(self.cs.constraints, self.rows):
            Jc, dc = self._constraint(c, row, x)
            J.append(Jc)
            drift.append(dc)
        nle = pin.nonLinearEffects(model, data, q, v)
        drift = None if any(d is None for d in drift) else np.concatenate(drift)
        self._x, self._cache = x, (M, np.vstack(J) if J else np.zeros((0, model.nv)), drift, nle)
        return self._cache

    def _constraint(self, c, row, x):
        pin = _pin()
        model, data = self.model, self.data
        LOCAL, LWA = pin.ReferenceFrame.LOCAL, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        if row[0] == "joint":
            J = np.zeros((c.rows, model.nv))
            J[:, row[1]] = np.eye(c.rows)
            return J, np.zeros(c.rows)
        if row[0] == "pair6":
            XAB = data.oMf[row[1]].actInv(data.oMf[row[2]]).action
            return (pin.getFrameJacobian(model, data, row[1], LOCAL)
                    - XAB @ pin.getFrameJacobian(model, data, row[2], LOCAL)), None
        if row[0] == "pair3":
            R_A = data.oMf[row[1]].rotation
            return R_A.T @ (pin.getFrameJacobian(model, data, row[1], LWA)[:3]
                            - pin.getFrameJacobian(model, data, row[2], LWA)[:3]), None
        fid = row[1]
        if c.world:
            acc = pin.getFrameClassicalAcceleration(model, data, fid, LWA).vector
            return pin.getFrameJacobian(model, data, fid, LWA)[:c.rows], acc[:c.rows]
        J = pin.getFrameJacobian(model, data, fid, LOCAL)
        acc = pin.getFrameAcceleration(model, data, fid, LOCAL).vector
        if c.kind in _LOCAL_KINDS:
            return J[:c.rows], acc[:c.rows]
        K = c.K_frame if c.K_frame is not None else np.asarray(x["K"][c.input_name], float).reshape(c.rows, 6)
        return K @ J, K @ acc

    # -- the oracle interface ------------------------------------------------------------------
    def prepare(self, x):
        """Hard constrained dynamics by constraintDynamics: k = our value of its zero
        constraint acceleration (0 for a local weld and a world-aligned point; −ω × v_p for a
        local point; R_F (ω_F × v_F) on the linear rows of a world-aligned weld)."""
        if "k" in x and "R" not in x and self.contacts is not None:
            x = dict(x, k=self._zero_acceleration_k(x["q"], x["v"]))
        return x

    def _zero_acceleration_k(self, q, v):
        pin = _pin()
        pin.forwardKinematics(self.model, self.data, q, v)
        k = []
        for c, cm in zip(self.cs.constraints, self.contacts):
            vel = cm.joint1_placement.actInv(self.data.v[cm.joint1_id])     # LOCAL, at the contact
            if c.world and c.rows == 3:
                k += [0.0] * 3
            elif c.world:
                R = self.data.oMi[cm.joint1_id].rotation @ cm.joint1_placement.rotation
                k += list(R @ np.cross(vel.angular, vel.linear)) + [0.0] * 3
            elif c.rows == 6:
                k += [0.0] * 6
            else:
                k += list(-np.cross(vel.angular, vel.linear))
        return np.array(k)

    def delassus(self, x):
        if self.missing:
            raise NotApplicable(self.missing)
        pin = _pin()
        if self.contacts is not None and not self.cs.world:
            cds = pin.StdVec_RigidConstraintData()
            for cm in self.contacts:
                cds.append(cm.createData())
            D = pin.computeDelassusMatrix(self.model, self.data, x["q"], self.contacts, cds)
            return 0.5 * (D + D.T)
        M, J, _, _ = self._sample(x)
        return J @ np.linalg.solve(M, J.T)

    def _regular(self, D):
        eig = np.linalg.eigvalsh(D)
        if eig.max() <= 0 or eig.min() <= 1e-10 * eig.max():
            raise NotApplicable(f"no unique answer: J M⁻¹ Jᵀ is singular (eigenvalues {eig.min():.3g} .. "
                                f"{eig.max():.3g}): redundant constraints")

    def expected(self, name, x):
        pin = _pin()
        if name == "tau" and "a" in x:
            return pin.rnea(self.model, self.data, x["q"], x["v"], x["a"])
        if name == "vdot" and "k" not in x:
            return pin.aba(self.model, self.data, x["q"], x["v"], x["tau"])
        if name in ("delassus", "osim", "delassus_apply", "delassus_explicit_apply", "damped_inverse_apply",
                    "damped_inverse_explicit"):
            D = self.delassus(x)
            if name == "delassus":
                return D
            if name == "osim":
                self._regular(D)
                return np.linalg.inv(D)
            if name.startswith("delassus"):
                return D @ x["lam"]
            return np.linalg.solve(np.diag(1 / x["R"]) + D, x["lam"])
        if name in ("vdot", "lam"):
            return self._dynamics(x)[0 if name == "vdot" else 1]
        raise NotApplicable("no counterpart in Pinocchio")

    def _dynamics(self, x):
        if self.missing:
            raise NotApplicable(self.missing)
        pin = _pin()
        if "R" not in x:
            self._regular(self.delassus(x))
            if self.contacts is not None:
                cds = pin.StdVec_RigidConstraintData()
                for cm in self.contacts:
                    cds.append(cm.createData())
                pin.initConstraintDynamics(self.model, self.data, self.contacts, cds)
                vdot = pin.constraintDynamics(self.model, self.data, x["q"], x["v"], x["tau"], self.contacts, cds)
                return np.array(vdot), np.array(self.data.lambda_c)
        M, J, drift, nle = self._sample(x)
        if drift is None:
            raise NotApplicable("Pinocchio gives no J̇v for link-to-link rows here")
        b, rhs = x["tau"] - nle, x["k"] - drift
        if "R" in x:
            Rinv = 1 / x["R"]
            vdot = np.linalg.solve(M + J.T @ (Rinv[:, None] * J), b + J.T @ (Rinv * rhs))
            return vdot, -Rinv * (J @ vdot - rhs)
        m = J.shape[0]
        sol = np.linalg.solve(np.block([[M, -J.T], [J, np.zeros((m, m))]]), np.concatenate([b, rhs]))
        return sol[:self.model.nv], sol[self.model.nv:]
