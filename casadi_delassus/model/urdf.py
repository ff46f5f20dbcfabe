"""URDF loading through yourdfpy (no meshes).  Bodies come out in Pinocchio's order:
depth-first from the root link, the child joints of each link in alphabetical order of
joint name (urdfdom keeps joints in a name-sorted map).  Fixed joints are merged into the
parent body; mimic joints are ordinary joints; an optional 6-DoF free joint named
``root_joint`` carries the root link, as ``pinocchio.JointModelFreeFlyer()`` does."""
from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from ..errors import ModelError
from .robot import Body, Frame, Joint, Robot, cross_matrix

_MOVING = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic"}


class _MergedInertia:
    """Mass, first moment and inertia about the body origin of links welded together."""

    def __init__(self):
        self.mass, self.first_moment, self.inertia_origin = 0.0, np.zeros(3), np.zeros((3, 3))

    def add(self, mass, com, inertia_com):
        c = cross_matrix(com)
        self.mass += mass
        self.first_moment += mass * com
        self.inertia_origin += inertia_com - mass * c @ c

    def com_form(self):
        if self.mass <= 0:
            return self.mass, np.zeros(3), self.inertia_origin
        com = self.first_moment / self.mass
        c = cross_matrix(com)
        return self.mass, com, self.inertia_origin + self.mass * c @ c


def _pose(origin):
    T = np.eye(4) if origin is None else np.asarray(origin, dtype=float)
    return T[:3, :3], T[:3, 3]


def load_urdf(path, floating_base=True, name=None):
    import yourdfpy

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    try:  # yourdfpy silently recovers from broken XML; a strict parse first names the fault
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        raise ModelError(f"malformed URDF {path}: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"malformed URDF {path}: root element is <{root.tag}>, expected <robot>")
    try:
        urdf = yourdfpy.URDF.load(str(path), load_meshes=False, build_scene_graph=False,
                                  load_collision_meshes=False, build_collision_scene_graph=False)
        model = urdf.robot
    except Exception as exc:  # yourdfpy raises many types for broken XML
        raise ModelError(f"malformed URDF {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if model is None or not model.links:
        raise ModelError(f"malformed URDF {path}: no links")

    links = {link.name: link for link in model.links}
    children = {}
    child_links = set()
    for j in model.joints:
        if j.parent not in links or j.child not in links:
            raise ModelError(f"malformed URDF {path}: joint {j.name!r} refers to a missing link")
        children.setdefault(j.parent, []).append(j)
        child_links.add(j.child)
    roots = [n for n in links if n not in child_links]
    if len(roots) != 1:
        raise ModelError(f"malformed URDF {path}: expected one root link, found {roots}")

    bodies, frames, merged = [], [], []

    def add_body(body_name, parent, joint, R, p):
        bodies.append(Body(body_name, parent, joint, R.T, p, 0.0, np.zeros(3), np.eye(3)))
        merged.append(_MergedInertia())
        return len(bodies) - 1

    def visit(link_name, body, R, p):
        """``R, p``: pose of this link in the coordinates of the body it is welded to."""
        if body >= 0:
            frames.append(Frame(link_name, body, R, p))
            inertial = links[link_name].inertial
            if inertial is not None and inertial.mass:
                Rc, pc = _pose(inertial.origin)
                I = np.asarray(inertial.inertia, dtype=float)
                merged[body].add(float(inertial.mass), R @ pc + p, R @ Rc @ I @ Rc.T @ R.T)
        for j in sorted(children.get(link_name, []), key=lambda j: j.name):
            Rj, pj = _pose(j.origin)
            Rc, pc = R @ Rj, R @ pj + p
            if j.type == "fixed":
                visit(j.child, body, Rc, pc)
            elif j.type in _MOVING:
                axis = np.array([1.0, 0, 0]) if j.axis is None else np.asarray(j.axis, float)
                new = add_body(j.child, body, Joint(j.name, _MOVING[j.type], axis), Rc, pc)
                visit(j.child, new, np.eye(3), np.zeros(3))
            else:
                raise ModelError(f"joint {j.name!r} in {path}: unsupported type {j.type!r}")

    root = roots[0]
    if floating_base:
        visit(root, add_body(root, -1, Joint("root_joint", "free"), np.eye(3), np.zeros(3)),
              np.eye(3), np.zeros(3))
    else:
        visit(root, -1, np.eye(3), np.zeros(3))
    for b, m in zip(bodies, merged):
        b.mass, b.com, b.inertia = m.com_form()
    fixed = [f for f in frames if f.name not in {b.name for b in bodies}]
    return Robot(name or path.stem, bodies, fixed, source=str(path))
