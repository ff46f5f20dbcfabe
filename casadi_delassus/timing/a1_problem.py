"""Issue 33's A1 contact problem, built as verify/contact_problems.py builds go1_stand, from pybullet's A1 URDF
(``pybullet_data/a1/a1.urdf``, ../shared/ROBOTS.md; the ``pybullet`` wheel of the bench extra ships it).

a1_stand: the file has no SRDF, so the stance is hip 0, upper 0.9, lower −1.8 rad on every leg (the one
bench/simulate.py stands Go2 on), identity base orientation, the base lowered until the lowest contact point
touches z = 0; four world-aligned point contacts at the toe spheres' lowest points in that pose (radius 0.02 m,
centred on the ``*_toe`` frames); μ = 0.8; v = 0; τ = the balancing torque (f_eq: least squares
J_baseᵀ f = nle_base; τ = nle − Jᵀ f_eq, base rows 0), so that λ* = dt f_eq."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DelassusError
from ..verify import contact_problems as cp

NAME = "a1_stand"
STANCE = {"hip": 0.0, "upper": 0.9, "lower": -1.8}
LEGS = ("FL", "FR", "RL", "RR")
TOE_RADIUS = 0.02
MU = 0.8


def urdf_path():
    """pybullet's A1 URDF, or DelassusError saying what to install."""
    try:
        import pybullet_data
    except ImportError:
        raise DelassusError("the A1 problem reads pybullet's A1 URDF: pip install pybullet (the bench extra)") from None
    path = Path(pybullet_data.getDataPath()) / "a1" / "a1.urdf"
    if not path.is_file():
        raise DelassusError(f"pybullet's A1 URDF is not at {path}")
    return path


def _contact_frames(model, q):
    """Adds one frame per toe at the sphere's lowest point in the pose q; returns (frames, points in the toe frames)."""
    import pinocchio as pin
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    frames, points = [], []
    for leg in LEGS:
        toe = model.getFrameId(f"{leg}_toe")
        point = data.oMf[toe].rotation.T @ np.array([0.0, 0.0, -TOE_RADIUS])
        placement = model.frames[toe].placement * pin.SE3(np.eye(3), point)
        frames.append(model.addFrame(pin.Frame(f"contact_{leg}", model.frames[toe].parentJoint, placement,
                                               pin.FrameType.OP_FRAME)))
        points.append(point)
    return frames, points


def build(dt=1e-3):
    """The a1_stand problem (a verify/contact_problems.Problem whose ``robot`` is the URDF's path)."""
    import pinocchio as pin
    path = urdf_path()
    model = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    q = pin.neutral(model)
    for leg in LEGS:
        for part, angle in STANCE.items():
            q[model.joints[model.getJointId(f"{leg}_{part}_joint")].idx_q] = angle
    frames, points = _contact_frames(model, q)
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    q[2] -= min(data.oMf[f].translation[2] for f in frames)
    v = np.zeros(model.nv)
    J = cp.delassus_and_free_velocity(model, frames, q, v, v, dt)[2]
    nle = pin.rnea(model, data, q, v, v)
    f_eq = np.linalg.lstsq(J[:, :6].T, nle[:6], rcond=None)[0]
    tau = nle - J.T @ f_eq
    tau[:6] = 0.0
    G, g, J, _ = cp.delassus_and_free_velocity(model, frames, q, v, tau, dt)
    specs = [cp.spec(f"{leg}_toe", p) for leg, p in zip(LEGS, points)]
    mass = sum(i.mass for i in model.inertias)
    return cp.Problem(NAME, str(path), specs, q, v, tau, np.full(len(frames), MU), dt, G, g, J, f_eq, mass, model,
                      frames)
