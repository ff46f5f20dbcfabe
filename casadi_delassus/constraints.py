"""Constraint specifications and their K_i (m_i x 6) in body coordinates.

Spec strings, one per constraint, blocks in the order given (../shared/DESIGN.md):

    LINK:6d            weld: rows [linear; angular] acceleration of the frame, in the frame
    LINK:3d[@x,y,z]    point (offset in the frame's coordinates): linear acceleration, frame axes
    LINK:random6       6 rows of a K seeded by the link name (numeric)
    LINK:random3       3 such rows
    LINK:6d-input      K_i (6 x 6) is a runtime input of the generated function
    LINK:3d-input      K_i (3 x 6) is a runtime input

LINK is a link of the model (also one merged into its parent through a fixed joint) or a
named frame.  Every K a user sees (numeric or runtime input) acts on the frame's spatial
acceleration in the frame's coordinates, [linear; angular] columns.  Internally it becomes
K_i acting on the *body's* spatial acceleration in body coordinates, Featherstone's
[angular; linear] order, which is what the algorithms consume.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from .errors import ConstraintError, DelassusError
from .model.robot import cross_matrix

KINDS = {"6d": 6, "3d": 3, "random6": 6, "random3": 3, "6d-input": 6, "3d-input": 3}
_SPEC = re.compile(r"^(?P<link>[^:@]+):(?P<kind>[A-Za-z0-9-]+)(?:@(?P<offset>[^@]+))?$")


def _frame_to_body(rotation, translation):
    """P · X_{F<-B}: maps the body's [ang; lin] acceleration (body coords) to the frame's
    [lin; ang] acceleration (frame coords)."""
    E = rotation.T
    return np.block([[-E @ cross_matrix(translation), E], [E, np.zeros((3, 3))]])


@dataclass
class Constraint:
    spec: str
    link: str
    kind: str
    body: int
    frame_map: np.ndarray          # P X_{F<-B} (6 x 6), numeric
    K_frame: np.ndarray | None     # m x 6 in the frame, [lin; ang]; None for runtime inputs

    @property
    def rows(self):
        return KINDS[self.kind]

    @property
    def is_input(self):
        return self.kind.endswith("-input")

    @property
    def input_name(self):
        return "K_" + re.sub(r"\W", "_", self.link)

    @property
    def row_names(self):
        names = ["vx", "vy", "vz", "wx", "wy", "wz"] if self.kind in ("6d", "6d-input") else \
            ["x", "y", "z"] if self.kind in ("3d", "3d-input") else [f"r{k}" for k in range(self.rows)]
        return [f"{self.link}.{n}" for n in names]

    def K_body(self, K_frame=None):
        """Internal K_i (body coords, [ang; lin] columns); ``K_frame`` for runtime inputs.
        Works for numpy arrays and CasADi SX alike."""
        K = self.K_frame if K_frame is None else K_frame
        return K @ self.frame_map


class ConstraintSet:
    """The constraints of one scenario, in the order given."""

    def __init__(self, robot, constraints):
        self.robot = robot
        self.constraints = list(constraints)
        if not self.constraints:
            raise ConstraintError("no constraints given (use e.g. -c LINK:6d)")
        offsets = np.cumsum([0] + [c.rows for c in self.constraints])
        self.offsets = offsets.tolist()
        self.m = int(offsets[-1])

    @classmethod
    def parse(cls, robot, specs):
        if isinstance(specs, str):
            specs = [specs]
        return cls(robot, [parse_constraint(robot, s) for s in specs])

    @property
    def inputs(self):
        return [c for c in self.constraints if c.is_input]

    @property
    def specs(self):
        return [c.spec for c in self.constraints]

    @property
    def row_names(self):
        return [n for c in self.constraints for n in c.row_names]

    def K_body(self, K_inputs=None):
        """Numeric internal K_i for every constraint; ``K_inputs`` maps input names to
        the user's K (frame, [lin; ang]) for the runtime-input constraints."""
        K_inputs = K_inputs or {}
        out = []
        for c in self.constraints:
            if c.is_input:
                if c.input_name not in K_inputs:
                    raise DelassusError(f"missing runtime input {c.input_name} ({c.rows}x6)")
                out.append(c.K_body(np.asarray(K_inputs[c.input_name], float).reshape(c.rows, 6)))
            else:
                out.append(c.K_body())
        return out

    def random_inputs(self, rng):
        return {c.input_name: rng.normal(size=(c.rows, 6)) for c in self.inputs}

    def describe(self):
        return [{"link": c.link, "type": c.kind, "rows": c.rows, "spec": c.spec,
                 "body": self.robot.bodies[c.body].name,
                 "K_frame": None if c.K_frame is None else np.round(c.K_frame, 15).tolist(),
                 "frame_map": np.round(c.frame_map, 15).tolist()}
                for c in self.constraints]


def parse_constraint(robot, spec):
    m = _SPEC.match(spec.strip())
    if not m:
        raise ConstraintError(f"bad constraint spec {spec!r}: expected LINK:TYPE with TYPE in "
                              f"{', '.join(KINDS)} (3d takes an optional @x,y,z offset)")
    link, kind, offset = m["link"], m["kind"].lower(), m["offset"]
    if kind not in KINDS:
        raise ConstraintError(f"bad constraint spec {spec!r}: unknown type {kind!r}; "
                              f"expected one of {', '.join(KINDS)}")
    if offset is not None and kind != "3d":
        raise ConstraintError(f"bad constraint spec {spec!r}: only 3d takes an @x,y,z offset")
    try:
        frame = robot.frame(link)
    except DelassusError as exc:
        raise ConstraintError(f"bad constraint spec {spec!r}: {exc}") from None
    point = np.zeros(3)
    if offset is not None:
        try:
            point = np.array([float(x) for x in offset.split(",")])
        except ValueError:
            point = np.zeros(0)
        if point.shape != (3,) or not np.all(np.isfinite(point)):
            raise ConstraintError(f"bad constraint spec {spec!r}: offset must be three numbers x,y,z")
    if kind == "6d":
        K = np.eye(6)
    elif kind == "3d":
        K = np.hstack([np.eye(3), -cross_matrix(point)])
    elif kind.startswith("random"):
        K = np.random.default_rng(zlib.crc32(link.encode())).normal(size=(KINDS[kind], 6))
    else:
        K = None
    return Constraint(spec.strip(), link, kind, frame.body,
                      _frame_to_body(frame.rotation, frame.translation), K)
