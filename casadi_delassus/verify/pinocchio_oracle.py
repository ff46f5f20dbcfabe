"""Pinocchio as a second, external oracle for models and constraints it can represent.

Pinocchio's ``computeDelassusMatrix`` ignores the second link of a link-to-link constraint;
its ``ConstraintCholeskyDecomposition`` does not, so the Delassus operator, with or without
damping, is taken from ``getDelassusOperatorCholeskyExpression()`` (``@`` and ``.solve``).
Needs the ``pin`` package (the ``test`` and ``bench`` extras)."""
from __future__ import annotations

import re

import numpy as np

from ..errors import DelassusError

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
    body frames as ours, so q and v are laid out alike.  For models Pinocchio cannot read
    itself (SDF, synthetic mechanisms, spatial_v2 JSON)."""
    pin = _pin()
    model = pin.Model()
    for b in robot.bodies:
        kind = b.joint.kind
        jm = {"free": lambda ax: pin.JointModelFreeFlyer(),
              "revolute": pin.JointModelRevoluteUnaligned,
              "continuous": _unbounded_revolute,
              "prismatic": pin.JointModelPrismaticUnaligned}[kind](b.joint.axis)
        j = model.addJoint(b.parent + 1, jm, pin.SE3(b.rotation.T, b.translation), b.joint.name)
        model.appendBodyToJoint(j, pin.Inertia(b.mass, b.com, b.inertia), pin.SE3.Identity())
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
    """Pinocchio's own URDF parse where the robot is a URDF file (the independent path), else
    ``model_from_robot``."""
    pin = _pin()
    src = str(getattr(robot, "source", "") or "")
    if src.endswith(".urdf"):
        return (pin.buildModelFromUrdf(src, pin.JointModelFreeFlyer()) if robot.floating_base
                else pin.buildModelFromUrdf(src))
    return model_from_robot(robot)


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
