"""SDF (1.6) loading for closed-loop robots such as Cassie: the spanning tree becomes a Robot,
each loop-closing ball joint a link-to-link 3D point constraint (constraints.py, ``A|B:3d``).

What is read (xml.etree, nothing else): the model's <pose>; each link's <pose> (in the model
frame) and <inertial> (<pose> in the link frame, <mass>, <inertia>, SDF's defaults where
missing); each joint's type, <parent>, <child>, <pose> (in the child link's frame, as SDF
1.6 has it) and <axis><xyz> (in the joint frame).  Poses relative to other frames, and
axes in the model frame, are not supported.

The spanning tree follows Pinocchio's SDF convention: the root is the link no joint has as
child (it floats on a free joint named ``root_joint``); a link that is the child of several
joints hangs on the first of them in the file, the others close loops; bodies come out
depth-first, the child joints of each link in file order.  A body's frame is its joint frame
(Featherstone, as Pinocchio's), so a link whose joint has a pose keeps its link frame as a
named frame; fixed joints merge the child link into its parent body.

A loop-closing ball joint J (parent P, child C, pose p in C's frame) gives
``C|P:3d@p;p'``: the point p on C against the point p' on P that coincides with it in the
file's configuration, rows along C's frame axes.  They are in ``robot.loops``.
"""
from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from ..errors import ModelError
from .robot import Body, Frame, Joint, Robot, check_numbers
from .urdf import _MergedInertia

_MOVING = {"revolute": "revolute", "prismatic": "prismatic"}
_INERTIA_DEFAULTS = {"ixx": 1.0, "iyy": 1.0, "izz": 1.0, "ixy": 0.0, "ixz": 0.0, "iyz": 0.0}


class _Pose:
    """A rigid placement: rotation R (columns: the frame's axes) and origin p."""

    def __init__(self, R=None, p=None):
        self.R = np.eye(3) if R is None else R
        self.p = np.zeros(3) if p is None else p

    def __mul__(self, other):
        return _Pose(self.R @ other.R, self.R @ other.p + self.p)

    def inverse(self):
        return _Pose(self.R.T, -self.R.T @ self.p)


def _rpy(r, p, y):
    """SDF/URDF roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r)."""
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


class _Reader:
    def __init__(self, path):
        self.path = path

    def fail(self, what):
        raise ModelError(f"malformed SDF {self.path}: {what}")

    def numbers(self, elem, n, what):
        try:
            values = [float(x) for x in (elem.text or "").split()]
        except ValueError:
            values = []
        if len(values) != n:
            self.fail(f"{what}: expected {n} numbers, got {elem.text!r}")
        return check_numbers(values, what, f"malformed SDF {self.path}: ")

    def pose(self, parent, what):
        elem = parent.find("pose")
        if elem is None:
            return _Pose()
        if elem.get("relative_to") or elem.get("frame"):
            self.fail(f"{what}: poses relative to another frame are not supported")
        v = self.numbers(elem, 6, f"<pose> of {what}")
        return _Pose(_rpy(*v[3:]), v[:3])

    def scalar(self, parent, tag, default, what):
        elem = parent.find(tag)
        return default if elem is None else float(self.numbers(elem, 1, f"<{tag}> of {what}")[0])

    def text(self, parent, tag, what):
        elem = parent.find(tag)
        if elem is None or not (elem.text or "").strip():
            self.fail(f"{what} has no <{tag}>")
        return elem.text.strip()


def _the_model(rd, root):
    """The <model> of an SDF document: <sdf><model>, or the one <model> of an <sdf><world> (as
    Gazebo saves a scene; its <include>s, such as a ground plane, are not models)."""
    if root.tag != "sdf":
        rd.fail(f"expected <sdf><model>, found <{root.tag}>")
    model = root.find("model")
    if model is not None:
        return model
    models = [m for w in root.findall("world") for m in w.findall("model")]
    if len(models) != 1:
        rd.fail("expected <sdf><model> or one <model> in an <sdf><world>, found " +
                (f"{len(models)} models in the world ({', '.join(repr(m.get('name')) for m in models)})"
                 if models else "no <model>"))
    return models[0]


def load_sdf(path, name=None):
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        raise ModelError(f"malformed SDF {path}: {exc}") from None
    rd = _Reader(path)
    model = _the_model(rd, root)
    world = rd.pose(model, "the model")
    links = {}
    for link in model.findall("link"):
        lname = link.get("name")
        if not lname:
            rd.fail("a <link> has no name")
        if lname in links:
            rd.fail(f"two <link> elements are named {lname!r}")
        links[lname] = link
    if not links:
        rd.fail("no links")
    joints = [_joint(rd, j, links) for j in model.findall("joint")]
    names = [j["name"] for j in joints]
    if len(set(names)) != len(names):
        rd.fail(f"two <joint> elements are named {next(n for n in names if names.count(n) > 1)!r}")
    placement = {n: world * rd.pose(link, f"link {n!r}") for n, link in links.items()}

    root_link, tree, loops = _spanning_tree(rd, links, joints)
    bodies, frames, merged, body_of = [], [], [], {}
    children = {}
    for j in tree:
        children.setdefault(j["parent"], []).append(j)

    def add_link(lname, body, body_pose):
        """Link ``lname`` rides on ``body`` whose frame is at ``body_pose`` (world)."""
        body_of[lname] = body
        rel = body_pose.inverse() * placement[lname]           # link frame in body coordinates
        frames.append(Frame(lname, body, rel.R, rel.p))
        inertial = links[lname].find("inertial")
        if inertial is not None:
            what = f"the inertial of link {lname!r}"
            com = rel * rd.pose(inertial, what)
            I = _inertia(rd, inertial.find("inertia"), what)
            merged[body].add(rd.scalar(inertial, "mass", 1.0, what), com.p, com.R @ I @ com.R.T)
        else:
            merged[body].add(1.0, rel.p, np.eye(3))                        # SDF's default inertial

    bodies.append(Body(root_link, -1, Joint("root_joint", "free"), np.eye(3), np.zeros(3), 0.0, np.zeros(3), np.eye(3)))
    merged.append(_MergedInertia())
    add_link(root_link, 0, placement[root_link])
    # depth first, child joints in file order, without recursion (long chains are valid models)
    stack = [(j, 0, placement[root_link]) for j in reversed(children.get(root_link, []))]
    while stack:
        j, body, body_pose = stack.pop()
        if j["type"] != "fixed":
            joint_pose = placement[j["child"]] * j["pose"]
            rel_joint = body_pose.inverse() * joint_pose
            bodies.append(Body(j["child"], body, Joint(j["name"], _MOVING[j["type"]], j["axis"]),
                               rel_joint.R.T, rel_joint.p, 0.0, np.zeros(3), np.eye(3)))
            merged.append(_MergedInertia())
            body, body_pose = len(bodies) - 1, joint_pose
        add_link(j["child"], body, body_pose)
        stack += [(k, body, body_pose) for k in reversed(children.get(j["child"], []))]
    missing = sorted(set(links) - set(body_of))
    if missing:
        rd.fail(f"links {missing[:8]}{' ...' if len(missing) > 8 else ''} are not connected to the root link "
                f"{root_link!r} (their joints form a cycle)")
    for b, m in zip(bodies, merged):
        b.mass, b.com, b.inertia = m.com_form()
    robot = Robot(name or model.get("name") or path.stem, bodies, frames, source=str(path))
    robot.loops = [_loop_spec(j, placement) for j in loops]
    return robot


def _spanning_tree(rd, links, joints):
    """(root link, tree joints, loop-closing joints), both in file order: a link's first
    parent joint in the file is its tree joint (Pinocchio's choice without guidance)."""
    parents = {n: [] for n in links}
    for j in joints:
        parents[j["child"]].append(j)
    roots = [n for n, js in parents.items() if not js]
    if len(roots) != 1:
        rd.fail(f"expected one root link (a link no joint has as child), found {roots}")
    tree = [j for j in joints if parents[j["child"]][0] is j]
    loops = [j for j in joints if parents[j["child"]][0] is not j]
    for j in tree:
        if j["type"] not in _MOVING and j["type"] != "fixed":
            rd.fail(f"joint {j['name']!r}: type {j['type']!r} in the spanning tree is not supported "
                    f"(revolute, prismatic, fixed; ball joints only close loops)")
    for j in loops:
        if j["type"] != "ball":
            rd.fail(f"joint {j['name']!r} closes a loop but is {j['type']!r}: only ball joints close loops")
    return roots[0], tree, loops


def _joint(rd, elem, links):
    jname = elem.get("name")
    if not jname:
        rd.fail("a <joint> has no name")
    what = f"joint {jname!r}"
    j = {"name": jname, "type": elem.get("type", ""), "parent": rd.text(elem, "parent", what),
         "child": rd.text(elem, "child", what), "pose": rd.pose(elem, what), "axis": None}
    for end in ("parent", "child"):
        if j[end] not in links:
            rd.fail(f"{what}: its {end} {j[end]!r} is not a link of the model")
    if j["parent"] == j["child"]:
        rd.fail(f"{what} connects link {j['child']!r} to itself")
    axis = elem.find("axis")
    if axis is not None and axis.find("xyz") is not None:
        xyz = axis.find("xyz")
        if xyz.get("expressed_in") or (axis.findtext("use_parent_model_frame") or "").strip() in ("1", "true"):
            rd.fail(f"{what}: axes in the model frame are not supported")
        j["axis"] = rd.numbers(xyz, 3, f"<axis><xyz> of {what}")
    if j["type"] in _MOVING and (j["axis"] is None or not np.any(j["axis"])):
        rd.fail(f"{what} has no (nonzero) <axis><xyz>")
    return j


def _inertia(rd, elem, what):
    v = {k: d if elem is None else rd.scalar(elem, k, d, what) for k, d in _INERTIA_DEFAULTS.items()}
    return np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]], [v["ixz"], v["iyz"], v["izz"]]])


def _format(p):
    return ",".join(f"{x:.12g}" for x in np.where(np.abs(p) < 1e-12, 0.0, p))


def _loop_spec(j, placement):
    """C|P:3d@p;p' for a loop-closing ball joint (see the module docstring)."""
    child, parent = j["child"], j["parent"]
    point = j["pose"].p                                              # in the child link's frame
    world = placement[child].R @ point + placement[child].p
    on_parent = placement[parent].R.T @ (world - placement[parent].p)
    return f"{child}|{parent}:3d@{_format(point)};{_format(on_parent)}"
