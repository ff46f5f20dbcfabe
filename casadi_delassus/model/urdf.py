"""URDF loading through yourdfpy (no meshes).  Bodies come out in Pinocchio's order:
depth-first from the root link, the child joints of each link in alphabetical order of
joint name (urdfdom keeps joints in a name-sorted map).  Fixed joints are merged into the
parent body; mimic joints are ordinary joints (independent DoFs, as Pinocchio's mimic=False;
``Joint.mimic`` records the <mimic>); an optional 6-DoF free joint named
``root_joint`` carries the root link, as ``pinocchio.JointModelFreeFlyer()`` does."""
from __future__ import annotations

import io
import logging
import warnings
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from ..errors import ModelError
from ..progress import note
from .robot import Body, Frame, Joint, Robot, check_numbers, cross_matrix

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


def _matrix(origin):
    return np.eye(4) if origin is None else np.asarray(origin, dtype=float)


def _pose(origin):
    T = _matrix(origin)
    return T[:3, :3], T[:3, 3]


READABLE_SHAPES = ("box", "cylinder", "sphere", "mesh")     # what yourdfpy reads in a <geometry>


def _pre_parse(path, source=None):
    """The strict ElementTree parse (yourdfpy silently recovers from broken XML and keeps the
    last of two links or joints with one name): the root element, its name, unique names.
    ``source``: what to read (a file object for a URDF given as text), ``path`` by default.
    Returns (the robot's name, the document without the geometry yourdfpy cannot read, as
    bytes, or None when there was none: see _drop_unreadable_geometry)."""
    try:
        root = ElementTree.parse(path if source is None else source).getroot()
    except ElementTree.ParseError as exc:
        raise ModelError(f"malformed URDF {path}: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"malformed URDF {path}: root element is <{root.tag}>, expected <robot>")
    if not (root.get("name") or "").strip():
        raise ModelError(f"malformed URDF {path}: <robot> has no name attribute")
    for tag in ("link", "joint"):
        seen = set()
        for elem in root.findall(tag):
            name = elem.get("name")
            if name is None:
                raise ModelError(f"malformed URDF {path}: a <{tag}> has no name attribute")
            if name in seen:
                raise ModelError(f"malformed URDF {path}: two <{tag}> elements are named {name!r}")
            seen.add(name)
    return root.get("name").strip(), _drop_unreadable_geometry(root, path)


def _drop_unreadable_geometry(root, path):
    """Dynamics reads no geometry, and yourdfpy refuses a whole file for one shape it does not
    know (``<capsule>``, in pybullet's files): such <visual> and <collision> elements are
    removed, said in one note naming the links.  Returns the document without them (bytes),
    or None when every shape is readable."""
    dropped = []
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for elem in link.findall(tag):
                geometry = elem.find("geometry")
                shape = geometry[0].tag if geometry is not None and len(geometry) else None
                if shape not in READABLE_SHAPES:
                    link.remove(elem)
                    dropped.append(f"link {link.get('name')!r}: <{shape or 'no geometry'}> {tag}")
    if not dropped:
        return None
    more = f" and {len(dropped) - 3} more" if len(dropped) > 3 else ""
    note(f"URDF {path}: ignored geometry casadi_delassus does not need and cannot read ({'; '.join(dropped[:3])}{more})")
    return ElementTree.tostring(root)


def _check_values(model, where):
    """Every number yourdfpy read (placements, axes, masses, inertias) finite and bounded."""
    for j in model.joints:
        check_numbers(_matrix(j.origin), f"joint {j.name!r}: <origin> (xyz, rpy)", where)
        if j.axis is not None:
            check_numbers(j.axis, f"joint {j.name!r}: <axis>", where)
    for link in model.links:
        if link.inertial is not None:
            what = f"link {link.name!r}: <inertial>"
            check_numbers(_matrix(link.inertial.origin), f"{what} <origin> (xyz, rpy)", where)
            check_numbers(0.0 if link.inertial.mass is None else link.inertial.mass, f"{what} <mass>", where)
            if link.inertial.inertia is not None:
                check_numbers(link.inertial.inertia, f"{what} <inertia>", where)


def _tree(model, where):
    """(root link, {link: [child joints sorted by name]}): one parent joint per link, one
    root, and every link reachable from it (a cycle of joints is not a tree)."""
    links = {link.name for link in model.links}
    children, parent_of = {}, {}
    for j in model.joints:
        if j.parent not in links or j.child not in links:
            raise ModelError(f"{where}joint {j.name!r} refers to a missing link")
        if j.parent == j.child:
            raise ModelError(f"{where}joint {j.name!r} connects link {j.child!r} to itself")
        if j.child in parent_of:
            raise ModelError(f"{where}link {j.child!r} is the child of two joints, {parent_of[j.child]!r} and "
                             f"{j.name!r} (a URDF is a tree; close loops in an SDF model instead)")
        parent_of[j.child] = j.name
        children.setdefault(j.parent, []).append(j)
    roots = [n for n in links if n not in parent_of]
    if len(roots) != 1:
        raise ModelError(f"{where}expected one root link, found {sorted(roots)}"
                         + (" (the joints form a cycle)" if not roots else ""))
    children = {k: sorted(v, key=lambda j: j.name) for k, v in children.items()}
    reached, stack = set(), [roots[0]]
    while stack:
        link = stack.pop()
        reached.add(link)
        stack += [j.child for j in children.get(link, [])]
    if reached != links:
        lost = sorted(links - reached)
        raise ModelError(f"{where}links {lost[:8]}{' ...' if len(lost) > 8 else ''} are not connected to the "
                         f"root link {roots[0]!r} (their joints form a cycle)")
    return roots[0], children


def load_urdf(path, floating_base=True, name=None):
    """The Robot of the URDF file ``path`` (named ``name``, default its <robot name>: packages
    name their files model.urdf)."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    robot_name, cleaned = _pre_parse(path)
    return _build(str(path) if cleaned is None else io.BytesIO(cleaned), path, floating_base, name or robot_name,
                  str(path))


URDF_TEXT = "<URDF text>"      # how a URDF given as a string is named in messages


def load_urdf_string(text, floating_base=True, name=None):
    """The Robot of a URDF document given as a string (named ``name``, default its <robot name>)."""
    robot_name, cleaned = _pre_parse(URDF_TEXT, io.BytesIO(text.encode()))
    return _build(io.BytesIO(text.encode() if cleaned is None else cleaned), URDF_TEXT, floating_base,
                  name or robot_name, URDF_TEXT)


@contextmanager
def _yourdfpy_silenced():
    """yourdfpy's log off while it reads: it logs its parser's fallback on an XML declaration
    of version "0.0" (pybullet's Minitaur) as two errors though it reads the file; what it
    cannot read raises, and is reported as one ModelError line."""
    logger = logging.getLogger("yourdfpy.urdf")
    before, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = before


def _mimic(joint):
    """A joint's <mimic> as plain data (None without one)."""
    m = joint.mimic
    return None if m is None else {"joint": m.joint, "multiplier": float(1.0 if m.multiplier is None else m.multiplier),
                                   "offset": float(0.0 if m.offset is None else m.offset)}


def _build(source, path, floating_base, name, label):
    """The Robot of the URDF in ``source`` (a file name or a file object), ``path`` naming it in
    messages and ``label`` as the Robot's source."""
    import yourdfpy

    where = f"malformed URDF {path}: "
    try:
        with warnings.catch_warnings(), _yourdfpy_silenced():   # sin(inf) in an rpy: reported below, as one line
            warnings.simplefilter("ignore", RuntimeWarning)
            model = yourdfpy.URDF.load(source, load_meshes=False, build_scene_graph=False,
                                       load_collision_meshes=False, build_collision_scene_graph=False).robot
    except Exception as exc:  # yourdfpy raises many types for broken XML
        raise ModelError(f"{where}{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if model is None or not model.links:
        raise ModelError(f"{where}no links")
    _check_values(model, where)
    root, children = _tree(model, where)
    links = {link.name: link for link in model.links}
    bodies, frames, merged = [], [], []

    def add_body(body_name, parent, joint, R, p):
        bodies.append(Body(body_name, parent, joint, R.T, p, 0.0, np.zeros(3), np.eye(3)))
        merged.append(_MergedInertia())
        return len(bodies) - 1

    def add_link(link_name, body, R, p):
        """``R, p``: pose of this link in the coordinates of the body it is welded to.  A mass
        of 0 keeps its rotational inertia (Pinocchio's too: Bolt's feet)."""
        if body < 0:
            return
        frames.append(Frame(link_name, body, R, p))
        inertial = links[link_name].inertial
        if inertial is not None:
            Rc, pc = _pose(inertial.origin)
            I = np.zeros((3, 3)) if inertial.inertia is None else np.asarray(inertial.inertia, dtype=float)
            merged[body].add(float(inertial.mass or 0.0), R @ pc + p, R @ Rc @ I @ Rc.T @ R.T)

    # depth first, children in joint-name order (Pinocchio's body order), without recursion:
    # a chain of thousands of links is a valid model
    if floating_base:
        top = (root, add_body(root, -1, Joint("root_joint", "free"), np.eye(3), np.zeros(3)), np.eye(3), np.zeros(3))
    else:
        top = (root, -1, np.eye(3), np.zeros(3))
    add_link(*top)
    stack = [(j, *top[1:]) for j in reversed(children.get(root, []))]
    while stack:
        j, body, R, p = stack.pop()
        Rj, pj = _pose(j.origin)
        Rc, pc = R @ Rj, R @ pj + p
        if j.type == "fixed":
            here = (body, Rc, pc)
        elif j.type in _MOVING:
            axis = np.array([1.0, 0, 0]) if j.axis is None else np.asarray(j.axis, float)
            joint = Joint(j.name, _MOVING[j.type], axis, mimic=_mimic(j))
            here = (add_body(j.child, body, joint, Rc, pc), np.eye(3), np.zeros(3))
        else:
            raise ModelError(f"joint {j.name!r} in {path}: unsupported type {j.type!r}")
        add_link(j.child, *here)
        stack += [(k, *here) for k in reversed(children.get(j.child, []))]
    for b, m in zip(bodies, merged):
        b.mass, b.com, b.inertia = m.com_form()
    fixed = [f for f in frames if f.name not in {b.name for b in bodies}]
    return Robot(name, bodies, fixed, source=label)
