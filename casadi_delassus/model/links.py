"""What a model offers to constrain and how its q is laid out (``casadi-delassus links MODEL``,
``cd.links``): its joints in q order with nq, nv and their ranges of q and v, and every name a
constraint spec may use — bodies, frames (links merged into their parent by a fixed joint,
an SDF link's own frame, a loader's named frames) and, for MJCF, sites — each with the body it
rides on and its placement there."""
from __future__ import annotations

import numpy as np

# the q entries of a joint, by kind (free and ball joints: the quaternion in the joint's own
# order, Joint.quaternion where the model sets it, Pinocchio's x, y, z, w otherwise)
_Q_LABELS = {"revolute": ["angle"], "prismatic": ["offset"], "continuous": ["cos", "sin"]}


def _quaternion_labels(joint):
    order = getattr(joint, "quaternion", "xyzw")
    return [f"q{c}" for c in order]


def q_labels(joint):
    """Names of the joint's q entries, in q order."""
    if joint.kind == "free":
        return ["x", "y", "z", *_quaternion_labels(joint)]
    if joint.kind == "ball":
        return _quaternion_labels(joint)
    return _Q_LABELS.get(joint.kind, [f"q{k}" for k in range(joint.nq)])


def frame_kind(robot, frame):
    """"body" for a body's own name, else the frame's kind ("frame", "site", ...)."""
    kind = getattr(frame, "kind", "frame")
    return "body" if kind == "frame" and robot.bodies[frame.body].name == frame.name else kind


def describe_links(robot):
    """Plain data: the robot's size, its joints in q order and its named frames."""
    joints = []
    for b in robot.bodies:
        j = b.joint
        joints.append({"joint": j.name, "type": j.kind, "body": b.name,
                       "parent": "world" if b.parent < 0 else robot.bodies[b.parent].name,
                       "nq": j.nq, "nv": j.nv, "q": [b.q_index, b.q_index + j.nq], "v": [b.v_index, b.v_index + j.nv],
                       "q_entries": q_labels(j),
                       "axis": None if j.axis is None else [float(x) for x in j.axis], "mimic": j.mimic})
    frames = [{"name": f.name, "kind": frame_kind(robot, f), "body": robot.bodies[f.body].name,
               "translation": [float(x) for x in np.round(f.translation, 12)],
               "rotation": [[float(x) for x in row] for row in np.round(f.rotation, 12)]}
              for f in robot.frames.values()]
    order = {"body": 0}
    frames.sort(key=lambda f: (order.get(f["kind"], 1), robot_body_index(robot, f["body"]), f["name"]))
    return {"robot": robot.name, "nq": robot.nq, "nv": robot.nv, "floating_base": robot.floating_base,
            "base": robot.base_note(), "source": str(robot.source) if robot.source else None, "joints": joints, "frames": frames}


def robot_body_index(robot, name):
    return next(i for i, b in enumerate(robot.bodies) if b.name == name)


def _range(r):
    return f"{r[0]}" if r[1] - r[0] == 1 else f"{r[0]}:{r[1]}"


def joint_rows(info):
    """Table rows of ``describe_links``'s joints: the q layout."""
    return [[j["joint"], j["type"], j["body"], j["parent"], j["nq"], j["nv"], _range(j["q"]), _range(j["v"]),
             ", ".join(j["q_entries"]), _mimic_text(j["mimic"])] for j in info["joints"]]


def _mimic_text(mimic):
    return "" if mimic is None else f"{mimic['joint']} × {mimic['multiplier']:g} + {mimic['offset']:g}"


JOINT_HEADERS = ["joint", "type", "body", "parent", "nq", "nv", "q", "v", "q entries", "mimics"]
MIMIC_NOTE = ("mimic joints are independent DoFs here (as Pinocchio's buildModelFromUrdf(..., mimic=False)): "
              "their q and v are not tied to the joint they mimic; --mimic (load_robot(..., mimic=True)) couples them "
              "for count and generate, with algorithm naive")


def frame_rows(info):
    """Table rows of ``describe_links``'s frames: what a constraint spec may name."""
    def placement(f):
        t = ", ".join(f"{x:.4g}" for x in f["translation"])
        turned = not np.allclose(f["rotation"], np.eye(3))
        return f"({t})" + (" turned" if turned else "")
    return [[f["name"], f["kind"], f["body"], placement(f)] for f in info["frames"]]


FRAME_HEADERS = ["name", "kind", "on body", "origin in the body (turned: axes differ)"]
