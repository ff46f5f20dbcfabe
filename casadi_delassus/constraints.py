"""Constraint specifications and their K_i (m_i x 6) in body coordinates.

Spec strings, one per constraint, blocks in the order given (../shared/DESIGN.md):

    LINK:6d            weld: rows [linear; angular] acceleration of the frame, in the frame
    LINK:3d[@x,y,z]    point (offset in the frame's coordinates): linear acceleration, frame axes
    LINK:random6       6 rows of a K seeded by the link name (numeric)
    LINK:random3       3 such rows
    LINK:6d-input      K_i (6 x 6) is a runtime input of the generated function
    LINK:3d-input      K_i (3 x 6) is a runtime input
    LINK:6d-world      weld, rows in world-aligned axes: [linear; angular] velocity of the frame
                       origin, turned into world axes (Pinocchio's LOCAL_WORLD_ALIGNED)
    LINK:3d-world[@x,y,z]  point, rows along the world axes (LOCAL_WORLD_ALIGNED; MuJoCo's connect)
    A|B:6d             relative weld: A's spatial acceleration minus B's, both taken at A's frame
                       origin, rows [linear; angular] in A's frame
    A|B:3d[@a[;b]]     relative point: linear acceleration of point a on A (A's frame coordinates,
                       default its origin) minus that of point b on B (B's frame coordinates,
                       default its origin), rows along A's frame axes
    JOINT:NAME         one row per DoF of joint NAME selecting its velocity entries (Pinocchio's
                       v order: a free joint gives [linear; angular] of its body)

LINK, A and B are links of the model (also ones merged into their parent through a fixed
joint) or named frames.  Every K a user sees (numeric or runtime input) acts on the frame's
spatial acceleration in the frame's coordinates, [linear; angular] columns.  Internally it
becomes K_i acting on the *body's* spatial acceleration in body coordinates, Featherstone's
[angular; linear] order, which is what the algorithms consume.

A link-to-link constraint is Pinocchio's ``RigidConstraintModel(CONTACT_3D or CONTACT_6D,
joint1 = A's joint, placement of A's frame (shifted to a), joint2 = B's joint, placement of
B's frame (shifted to b), LOCAL)``: its Jacobian is J = J_A − ^{cA}X_{cB}(q) J_B with the
frames' LOCAL Jacobians (6d), or the linear rows J_A − ^{cA}R_{cB}(q) J_B (3d).  A's body
carries the constant K_A = K_body(); B's body carries K_B(q) = −K_frame P ^{C}X_B(q), where
the frame C has A's frame axes and its origin at A's frame origin (6d) or at b (3d):
``K_body2`` builds it from the relative transform ^A X_B that the algorithms compute.  A
joint constraint acts on no link: its row block is 𝒦 = 1 on the joint's velocity entries.
"""
from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import casadi as ca
import numpy as np

from .errors import ConstraintError, DelassusError, unknown_name
from .model.robot import MAX_MAGNITUDE, cross_matrix
from .names import ident_part
from .symbolic.frames import local_transforms, world_rotations
from .symbolic.spatial import cross, sx

KINDS = {"6d": 6, "3d": 3, "random6": 6, "random3": 3, "6d-input": 6, "3d-input": 3, "6d-world": 6, "3d-world": 3}
WORLD = "-world"
POINT_KINDS = ("3d", "3d-world")       # the kinds that take an @x,y,z offset
PAIR_KINDS = ("3d", "6d")
JOINT_PREFIX = "JOINT:"
_SPEC = re.compile(r"^(?P<link>[^:@]+):(?P<kind>[A-Za-z0-9-]+)(?:@(?P<offset>[^@]+))?$")
_FREE_ROWS = ["vx", "vy", "vz", "wx", "wy", "wz"]


def _frame_to_body(rotation, translation):
    """P · X_{F<-B}: maps the body's [ang; lin] acceleration (body coords) to the frame's
    [lin; ang] acceleration (frame coords)."""
    E = rotation.T
    return np.block([[-E @ cross_matrix(translation), E], [E, np.zeros((3, 3))]])


def _point_rows(point):
    """[−p×, 1]: a point's linear acceleration from the body's [ang; lin] acceleration (body axes)."""
    return np.hstack([-cross_matrix(point), np.eye(3)])


@dataclass
class Constraint:
    spec: str
    link: str                      # LINK or A; for JOINT:NAME the joint's name
    kind: str                      # a key of KINDS, or "joint"
    body: int                      # the body of LINK / A; for a joint, the body it moves
    frame_map: np.ndarray | None   # P X_{F<-B} (6 x 6), numeric; None for a joint
    K_frame: np.ndarray | None     # m x 6 in the frame, [lin; ang]; None for runtime inputs and joints
    link2: str | None = None       # A|B: B
    body2: int | None = None       # A|B: B's body
    axes: np.ndarray | None = None     # A|B and -world: the frame's axes (columns) in its body's coordinates
    point: np.ndarray | None = None    # -world: the point (3d) or the frame origin (6d) in body coordinates
    point2: np.ndarray | None = None   # A|B:3d: the point b in B's body coordinates
    joint: str | None = None       # JOINT:NAME: NAME
    joint_nv: int = 0              # JOINT:NAME: the joint's DoF count (its rows)
    input_name: str | None = None  # runtime inputs: K_<link>, set by ConstraintSet (unique in the set)

    @property
    def rows(self):
        return self.joint_nv if self.joint else KINDS[self.kind]

    @property
    def unary(self):
        """Between one link and the world (what every algorithm accepts)."""
        return self.body2 is None and self.joint is None

    @property
    def bodies(self):
        """The bodies whose spatial acceleration the rows read (the paper's L_e)."""
        return () if self.joint else (self.body,) if self.body2 is None else (self.body, self.body2)

    @property
    def is_input(self):
        return self.kind.endswith("-input")

    @property
    def world(self):
        """Rows in world-aligned axes: K_i depends on q (the module docstring)."""
        return self.kind.endswith(WORLD)

    @property
    def row_names(self):
        if self.joint:
            names = _FREE_ROWS if self.joint_nv == 6 else ["v"]
        else:
            names = _FREE_ROWS if self.kind in ("6d", "6d-input", "6d-world") else \
                ["x", "y", "z"] if self.kind in ("3d", "3d-input", "3d-world") else [f"r{k}" for k in range(self.rows)]
        label = self.link if self.link2 is None else f"{self.link}|{self.link2}"
        return [f"{label}.{n}" for n in names]

    def K_body(self, K_frame=None, rotation=None):
        """Internal K_i (body coords, [ang; lin] columns); ``K_frame`` for runtime inputs,
        ``rotation`` R_B (SX 3x3: the body's axes in world coordinates at q) for world-aligned
        rows.  Works for numpy arrays and CasADi SX alike.  For a joint: 𝒦 = 1 (rows x n_i) on
        the joint's velocity entries.  For A|B: A's rows."""
        if self.joint:
            return np.eye(self.joint_nv)
        K = self.K_frame if K_frame is None else K_frame
        if not self.world:
            return K @ self.frame_map
        if rotation is None:
            raise DelassusError(f"constraint {self.spec!r}: world-aligned rows depend on q (symbolic_K_bodies)")
        return ca.mtimes(self._turned(rotation), sx(K @ self.frame_map))

    def _turned(self, rotation):
        """diag(R_F, …) (rows x rows), R_F = R_B F: frame axes to world axes, per three rows."""
        R_F = ca.mtimes(sx(rotation), sx(self.axes))
        return ca.diagcat(*[R_F] * (self.rows // 3))

    def rotation_rate(self, rotation, velocity):
        """K̇_i v_i of world-aligned rows (SX column): diag(R_F, …) (ω_F × u) per three rows, with
        u = K_frame P X_{F<-B} v_i and ω_F = Fᵀ ω the frame's angular velocity in its axes, for
        the body's spatial velocity ``velocity`` (6-list, body coordinates, [angular; linear])
        and its world rotation ``rotation`` (R_B)."""
        v = ca.vertcat(*[sx(x) for x in velocity])
        u = ca.mtimes(sx(self.K_frame @ self.frame_map), v)
        w = ca.mtimes(sx(self.axes.T), v[:3])
        return ca.mtimes(self._turned(rotation), ca.vertcat(*[cross(w, u[3 * g:3 * g + 3]) for g in range(self.rows // 3)]))

    def K_body2(self, X_AB):
        """A|B: K_B (SX), B's rows on B's spatial acceleration (B coords, [ang; lin]), from the
        relative transform ^A X_B (spatial.Transform; E maps B to A coordinates)."""
        if self.kind == "6d":
            return -X_AB.transpose_rows(self.K_body())
        return -ca.mtimes(ca.mtimes(sx(self.axes.T), X_AB.E), sx(_point_rows(self.point2)))


# What the public functions take as constraints: a scenario name, a list of specs, or a ConstraintSet
ConstraintsLike: TypeAlias = "str | Sequence[str] | ConstraintSet"


class ConstraintSet:
    """The constraints of one scenario, in the order given."""

    def __init__(self, robot, constraints, allow_empty=False):
        """``allow_empty``: no constraints is a set too (the empty contact mode of a library,
        casadi_delassus/contact_modes/, whose dynamics are ABA's); elsewhere it is an error."""
        self.robot = robot
        self.constraints = list(constraints)
        if not self.constraints and not allow_empty:
            raise ConstraintError("no constraints given (use e.g. -c LINK:6d)")
        offsets = np.cumsum([0] + [c.rows for c in self.constraints])
        self.offsets = offsets.tolist()
        self.m = int(offsets[-1])
        self._name_inputs()

    def _name_inputs(self):
        """K_<link> for each runtime-input constraint (names.ident_part of the link: valid and
        distinct for distinct links, e.g. a.b and a_b); a link that is a runtime input again
        gets K_<link>_2, K_<link>_3, ... in order.  A name that still meets another one is
        refused, naming both specs."""
        given, seen = {}, {}
        for c in self.inputs:
            base = "K_" + ident_part(c.link)
            seen[base] = seen.get(base, 0) + 1
            name = base if seen[base] == 1 else f"{base}_{seen[base]}"
            if name in given:
                raise ConstraintError(f"runtime inputs {given[name].spec!r} and {c.spec!r} would both be named {name}: "
                                      f"give one of them another link")
            c.input_name, given[name] = name, c

    @classmethod
    def parse(cls, robot, specs):
        return cls(robot, [parse_constraint(robot, s) for s in spec_list(specs)])

    @classmethod
    def parse_or_empty(cls, robot, specs):
        """The set of ``specs``, the empty set when there are none (a contact mode with no active constraint)."""
        return cls.parse(robot, specs) if specs else cls(robot, [], allow_empty=True)

    @property
    def inputs(self):
        return [c for c in self.constraints if c.is_input]

    @property
    def non_unary(self):
        """The link-to-link and joint constraints."""
        return [c for c in self.constraints if not c.unary]

    @property
    def specs(self):
        return [c.spec for c in self.constraints]

    @property
    def row_names(self):
        return [n for c in self.constraints for n in c.row_names]

    @property
    def world(self):
        """The constraints with world-aligned rows (their K_i depend on q)."""
        return [c for c in self.constraints if c.world]

    def symbolic_K_bodies(self, q, K_syms=None):
        """K_i (body coordinates, [ang; lin] columns) of every constraint as the algorithms take
        them: numeric, SX of the runtime inputs ``K_syms`` ({input name: SX}), or SX of q for
        world-aligned rows (their bodies' world rotations from the joint transforms at q)."""
        K_syms = K_syms or {}
        bodies = [c.body for c in self.world]
        R = world_rotations(self.robot, local_transforms(self.robot, q), bodies) if bodies else {}
        return [c.K_body(K_syms[c.input_name]) if c.is_input else c.K_body(rotation=R.get(c.body))
                for c in self.constraints]

    def K_body(self, K_inputs=None):
        """Numeric internal K_i for every constraint; ``K_inputs`` maps input names to
        the user's K (frame, [lin; ang]) for the runtime-input constraints.  None for
        world-aligned rows: they depend on q (``symbolic_K_bodies``)."""
        K_inputs = K_inputs or {}
        out = []
        for c in self.constraints:
            if c.world:
                out.append(None)
            elif c.is_input:
                if c.input_name not in K_inputs:
                    raise DelassusError(f"missing runtime input {c.input_name} ({c.rows}x6)")
                out.append(c.K_body(np.asarray(K_inputs[c.input_name], float).reshape(c.rows, 6)))
            else:
                out.append(c.K_body())
        return out

    def random_inputs(self, rng):
        return {c.input_name: rng.normal(size=(c.rows, 6)) for c in self.inputs}

    def describe(self):
        def r(a):
            return None if a is None else np.round(a, 15).tolist()
        out = []
        for c in self.constraints:
            d = {"link": c.link, "type": c.kind, "rows": c.rows, "spec": c.spec,
                 "body": self.robot.bodies[c.body].name, "K_frame": r(c.K_frame), "frame_map": r(c.frame_map)}
            if c.body2 is not None:
                d |= {"link2": c.link2, "body2": self.robot.bodies[c.body2].name, "point2": r(c.point2)}
            if c.joint:
                d["joint"] = c.joint
            out.append(d)
        return out


def _shown(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def spec_list(specs):
    """``specs`` (one spec string, or a list, tuple or other iterable of them) as a list of strings, or a
    ConstraintError naming what is not a spec (an int, None, bytes, a list of lists)."""
    if isinstance(specs, str):
        return [specs]
    try:
        if isinstance(specs, (bytes, bytearray, dict)):
            raise TypeError
        specs = list(specs)
    except TypeError:
        raise ConstraintError(f"constraints must be a spec string such as 'LINK:6d' or a list of them, "
                              f"got {type(specs).__name__} {_shown(specs)}") from None
    for s in specs:
        if not isinstance(s, str):
            raise ConstraintError(f"bad constraint spec {_shown(s)}: expected a string such as 'LINK:6d', "
                                  f"got {type(s).__name__}")
    return specs


def parse_constraint(robot, spec):
    if not isinstance(spec, str):
        raise ConstraintError(f"bad constraint spec {_shown(spec)}: expected a string such as 'LINK:6d', "
                              f"got {type(spec).__name__}")
    spec = spec.strip()
    if spec.startswith(JOINT_PREFIX):
        return _joint_constraint(robot, spec, spec[len(JOINT_PREFIX):].strip())
    m = _SPEC.fullmatch(spec)
    if not m:
        raise ConstraintError(f"bad constraint spec {spec!r}: expected LINK:TYPE with TYPE in "
                              f"{', '.join(KINDS)} (3d and 3d-world take an optional @x,y,z offset), "
                              f"A|B:3d[@a[;b]], A|B:6d or {JOINT_PREFIX}NAME")
    link, kind, offset = m["link"], m["kind"].lower(), m["offset"]
    if kind not in KINDS:
        raise ConstraintError(f"bad constraint spec {spec!r}: unknown type {kind!r}; "
                              f"expected one of {', '.join(KINDS)}")
    if "|" in link:
        return _pair_constraint(robot, spec, link, kind, offset)
    if offset is not None and kind not in POINT_KINDS:
        raise ConstraintError(f"bad constraint spec {spec!r}: only {' and '.join(POINT_KINDS)} take an @x,y,z offset")
    frame = _frame(robot, spec, link)
    point = np.zeros(3) if offset is None else _point(spec, offset, "offset must be three numbers x,y,z")
    if kind in ("6d", "6d-world"):
        K = np.eye(6)
    elif kind in POINT_KINDS:
        K = np.hstack([np.eye(3), -cross_matrix(point)])
    elif kind.startswith("random"):
        K = np.random.default_rng(zlib.crc32(link.encode())).normal(size=(KINDS[kind], 6))
    else:
        K = None
    return Constraint(spec, link, kind, frame.body, _frame_to_body(frame.rotation, frame.translation), K,
                      **({"axes": frame.rotation, "point": frame.translation + frame.rotation @ point}
                         if kind.endswith(WORLD) else {}))


def _frame(robot, spec, name):
    try:
        return robot.frame(name)
    except DelassusError as exc:
        raise ConstraintError(f"bad constraint spec {spec!r}: {exc}") from None


def _point(spec, text, problem):
    """Three numbers x,y,z, each finite and within the model numbers' range (MAX_MAGNITUDE);
    plain decimal only (Python's float() would read 1_0 as 10)."""
    try:
        if "_" in text:
            raise ValueError(text)
        p = np.array([float(x) for x in text.split(",")])
    except ValueError:
        p = np.zeros(0)
    if p.shape != (3,) or not np.all(np.isfinite(p)):
        raise ConstraintError(f"bad constraint spec {spec!r}: {problem}")
    if np.abs(p).max() > MAX_MAGNITUDE:
        raise ConstraintError(f"bad constraint spec {spec!r}: an offset of magnitude {np.abs(p).max():.3g}, above the "
                              f"{MAX_MAGNITUDE:g} this tool accepts for model numbers (it would overflow downstream)")
    return p


def _pair_constraint(robot, spec, links, kind, points):
    """A|B:3d[@a[;b]] or A|B:6d (see the module docstring)."""
    names = [s.strip() for s in links.split("|")]
    if len(names) != 2 or not all(names):
        raise ConstraintError(f"bad constraint spec {spec!r}: a link-to-link constraint names two links, A|B")
    if kind not in PAIR_KINDS:
        raise ConstraintError(f"bad constraint spec {spec!r}: a link-to-link constraint is {' or '.join(PAIR_KINDS)}, "
                              f"not {kind!r}")
    if points is not None and kind != "3d":
        raise ConstraintError(f"bad constraint spec {spec!r}: only A|B:3d takes points @ax,ay,az[;bx,by,bz]")
    A, B = (_frame(robot, spec, n) for n in names)
    if A.body == B.body:
        raise ConstraintError(f"bad constraint spec {spec!r}: {names[0]!r} and {names[1]!r} are on the same body "
                              f"{robot.bodies[A.body].name!r}, so nothing moves between them")
    parts = [] if points is None else points.split(";")
    if len(parts) > 2:
        raise ConstraintError(f"bad constraint spec {spec!r}: points must be @ax,ay,az[;bx,by,bz]")
    a, b = ([_point(spec, t, "points must be @ax,ay,az[;bx,by,bz] (three numbers each)") for t in parts]
            + [np.zeros(3)] * 2)[:2]
    K = np.eye(6) if kind == "6d" else np.hstack([np.eye(3), -cross_matrix(a)])
    return Constraint(spec, names[0], kind, A.body, _frame_to_body(A.rotation, A.translation), K,
                      link2=names[1], body2=B.body, axes=A.rotation, point2=B.translation + B.rotation @ b)


def _joint_constraint(robot, spec, name):
    bodies = {b.joint.name: i for i, b in enumerate(robot.bodies)}
    if name not in bodies:
        raise ConstraintError(f"bad constraint spec {spec!r}: "
                              + unknown_name(f"joint of robot {robot.name!r}", name, bodies))
    i = bodies[name]
    return Constraint(spec, name, "joint", i, None, None, joint=name, joint_nv=robot.bodies[i].joint.nv)
