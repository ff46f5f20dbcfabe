"""The kinematic tree every algorithm reads: bodies in Pinocchio's depth-first order, each
hanging on one joint from its parent, with numeric (cleaned) geometry and inertia.

Frames follow Featherstone: a body's coordinates are its joint frame after the joint's
motion.  ``Body.rotation``/``Body.translation`` are the tree transform X_T from the parent
body to the joint frame before motion, stored compactly: ``rotation`` E maps parent
coordinates to joint-frame coordinates, ``translation`` r is the joint-frame origin in
parent coordinates.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError, unknown_name

_EXACT = (0.0, 1.0, -1.0)
# The largest magnitude accepted for a model number (length, mass, inertia, gravity), in any
# unit.  Robots are far inside it; beyond it the products the algorithms form (inertias times
# squared lengths, summed over the tree, then multiplied again in the factorizations) approach
# double overflow, and a model value of 1e308 made the generated code return inf.
MAX_MAGNITUDE = 1e12


def check_numbers(values, what, where=""):
    """``values`` as a float array, or a ModelError (``where`` + ``what`` + the problem) when
    an entry is not a number, not finite, or larger in magnitude than MAX_MAGNITUDE."""
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}{what} is not numeric") from None
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{where}{what} has a non-finite value")
    if a.size and np.abs(a).max() > MAX_MAGNITUDE:
        raise ModelError(f"{where}{what} has a value of magnitude {np.abs(a).max():.3g}, "
                         f"above the {MAX_MAGNITUDE:g} this tool accepts (it would overflow downstream)")
    return a


def clean(values, tol=1e-14):
    """Snap values within ``tol`` of 0 or ±1 to exactly that, so the traced SX code
    drops the multiplications by 0 and 1 (an unclean cos(pi/2) once cost 57 % more ops)."""
    a = np.array(values, dtype=float)
    for v in _EXACT:
        a[np.abs(a - v) < tol] = v
    return a


def clean_rotation(E):
    """E with entries within 1e-10 of 0 or ±1 made exact when the result is still a rotation
    (model rotations by π carry ~1e-11 noise, Talos's URDF among them); otherwise E as the
    model has it.  Entries 1e-11 from ±1 of a rotation by 1.5708 rad (Cassie's SDF) are not
    noise: snapping them alone changed the model by ~1e-11, which the damped inverse amplified
    to 2e-9.  Done once here, so the NumPy reference and the generated code see the same model
    (snapped in the SX code only, it moved J v̇ by ~2e-8 against the reference on Talos)."""
    S = clean(E, 1e-10)
    return S if np.abs(S @ S.T - np.eye(3)).max() <= 1e-14 else clean(E)


@dataclass
class Joint:
    """A joint: 'free' (6 DoF, Pinocchio FreeFlyer layout), 'revolute', 'continuous'
    (revolute stored as (cos, sin) in q, as Pinocchio's unbounded revolute) or 'prismatic'."""
    name: str
    kind: str
    axis: np.ndarray | None = None

    NQ = {"free": 7, "revolute": 1, "continuous": 2, "prismatic": 1}
    NV = {"free": 6, "revolute": 1, "continuous": 1, "prismatic": 1}

    @property
    def nq(self):
        return self.NQ[self.kind]

    @property
    def nv(self):
        return self.NV[self.kind]

    def motion_subspace(self):
        """S (6 x nv) in the body frame, Featherstone [angular; linear] order."""
        if self.kind == "free":
            # Pinocchio's free-flyer velocity is [linear; angular] in the body frame.
            return np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])
        s = np.zeros((6, 1))
        if self.kind == "prismatic":
            s[3:, 0] = self.axis
        else:
            s[:3, 0] = self.axis
        return s


@dataclass
class Body:
    name: str
    parent: int                     # index of the parent body, -1 for the world
    joint: Joint
    rotation: np.ndarray            # E_T (3x3): parent coords -> joint frame coords
    translation: np.ndarray         # r_T (3,): joint frame origin in parent coords
    mass: float
    com: np.ndarray                 # centre of mass in body coords
    inertia: np.ndarray             # rotational inertia about the com, body axes
    q_index: int = 0
    v_index: int = 0

    def spatial_inertia(self):
        """6x6 spatial inertia about the body origin, [angular; linear] order."""
        c = cross_matrix(self.com)
        return np.block([[self.inertia - self.mass * c @ c, self.mass * c],
                         [-self.mass * c, self.mass * np.eye(3)]])


@dataclass
class Frame:
    """A named frame rigidly attached to a body: ``rotation`` has the frame's axes as
    columns in body coordinates, ``translation`` is its origin in body coordinates.  ``kind``
    says what the model calls it where a loader knows better than "frame" (e.g. "site");
    a body's own frame is listed as "body" (model/links.py)."""
    name: str
    body: int
    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    translation: np.ndarray = field(default_factory=lambda: np.zeros(3))
    kind: str = "frame"


def cross_matrix(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class Robot:
    """A kinematic tree (or forest) of rigid bodies with numeric parameters."""

    def __init__(self, name, bodies, frames=(), source=None, gravity=(0.0, 0.0, -9.81)):
        self.name = name
        self.bodies = list(bodies)
        self.source = source
        self.gravity = np.asarray(gravity, dtype=float)
        self.scenarios = {}             # name -> constraint specs (registry robots)
        self.model_file = None          # the resolved path when loaded from a model file
        self._check_tree()
        q = v = 0
        for b in self.bodies:
            b.rotation, b.translation = clean_rotation(b.rotation), clean(b.translation)
            b.com, b.inertia = clean(b.com), clean(b.inertia)
            if b.joint.axis is not None:
                b.joint.axis = clean(np.asarray(b.joint.axis, float) / np.linalg.norm(b.joint.axis))
            b.q_index, b.v_index = q, v
            q += b.joint.nq
            v += b.joint.nv
        self.nq, self.nv = q, v
        self.frames = {b.name: Frame(b.name, i) for i, b in enumerate(self.bodies)}
        for f in frames:
            # a loader's frame wins over the body frame of the same name: an SDF link whose
            # joint frame is not the link frame keeps its link frame under its name
            check_numbers(f.rotation, f"frame {f.name!r}: rotation")
            check_numbers(f.translation, f"frame {f.name!r}: translation")
            f.rotation, f.translation = clean_rotation(f.rotation), clean(f.translation)
            self.frames[f.name] = f
        self._check_inertias()

    # -- structure -------------------------------------------------------------------
    def _check_tree(self):
        if not self.bodies:
            raise ModelError(f"robot {self.name!r} has no moving bodies")
        names = set()
        check_numbers(self.gravity, f"robot {self.name!r}: gravity")
        for i, b in enumerate(self.bodies):
            for what, value in (("joint placement rotation", b.rotation), ("joint placement translation",
                                b.translation), ("mass", b.mass), ("centre of mass", b.com), ("inertia", b.inertia),
                                ("joint axis", [] if b.joint.axis is None else b.joint.axis)):
                check_numbers(value, f"body {b.name!r}: {what}")
            if not -1 <= b.parent < i:
                raise ModelError(f"body {b.name!r}: parent index {b.parent} does not precede it")
            if b.name in names:
                raise ModelError(f"duplicate body name {b.name!r}")
            names.add(b.name)
            if b.joint.kind not in Joint.NQ:
                raise ModelError(f"joint {b.joint.name!r}: unsupported type {b.joint.kind!r}")
            if b.joint.kind != "free" and (b.joint.axis is None or np.linalg.norm(b.joint.axis) < 1e-12):
                raise ModelError(f"joint {b.joint.name!r} has a zero axis")

    def _check_inertias(self):
        for b in self.bodies:
            sym = 0.5 * (b.inertia + b.inertia.T)
            if not (b.mass > 0 and np.all(np.isfinite(sym)) and np.linalg.eigvalsh(sym).min() > 0):
                raise ModelError(
                    f"moving body {b.name!r} has a non-positive-definite inertia "
                    f"(mass {b.mass:g}, principal moments {np.round(np.linalg.eigvalsh(sym), 12).tolist()})")

    @property
    def n_bodies(self):
        return len(self.bodies)

    @property
    def floating_base(self):
        return self.bodies[0].joint.kind == "free"

    @property
    def joint_names(self):
        return [b.joint.name for b in self.bodies]

    def parent(self, i):
        return self.bodies[i].parent

    def children(self, i):
        return [j for j, b in enumerate(self.bodies) if b.parent == i]

    def ancestors(self, i):
        """Bodies from ``i`` up to its root, ``i`` included."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.bodies[i].parent
        return out

    def depth(self):
        return max(len(self.ancestors(i)) for i in range(self.n_bodies))

    def frame(self, name):
        if name not in self.frames:
            raise ModelError(unknown_name(f"link or frame of robot {self.name!r}", name, self.frames))
        return self.frames[name]

    # -- configurations --------------------------------------------------------------
    def random_q(self, rng):
        q = np.zeros(self.nq)
        for b in self.bodies:
            k, j = b.q_index, b.joint
            if j.kind == "free":
                quat = rng.normal(size=4)
                q[k:k + 3] = rng.uniform(-1, 1, 3)
                q[k + 3:k + 7] = quat / np.linalg.norm(quat)
            elif j.kind == "continuous":
                a = rng.uniform(-np.pi, np.pi)
                q[k:k + 2] = np.cos(a), np.sin(a)
            elif j.kind == "revolute":
                q[k] = rng.uniform(-np.pi, np.pi)
            else:
                q[k] = rng.uniform(-0.5, 0.5)
        return q

    def neutral_q(self):
        """q₀ (Pinocchio's neutral): zero joint angles and offsets, the identity orientation at
        the origin for a free joint, (cos, sin) = (1, 0) for a continuous one."""
        q = np.zeros(self.nq)
        for b in self.bodies:
            if b.joint.kind == "free":
                q[b.q_index + 6] = 1.0
            elif b.joint.kind == "continuous":
                q[b.q_index] = 1.0
        return q

    def perturbed_q(self, q, delta, rng):
        """q + δ N(0, 1) on the revolute and prismatic joints (free and continuous ones kept)."""
        q = np.array(q, dtype=float)
        for b in self.bodies:
            if b.joint.kind in ("revolute", "prismatic"):
                q[b.q_index] += delta * rng.normal()
        return q

    def check_q(self, q):
        from ..errors import InputError
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.size != self.nq:
            raise InputError(f"q has {q.size} entries, robot {self.name!r} needs nq = {self.nq}")
        return q

    # -- identity --------------------------------------------------------------------
    def describe(self):
        """Everything that determines generated code, as plain data (for hashing)."""
        def r(a):
            return np.round(np.asarray(a, float), 15).tolist()
        return {
            "name": self.name,
            "gravity": r(self.gravity),
            "bodies": [[b.name, b.parent, b.joint.name, b.joint.kind,
                        None if b.joint.axis is None else r(b.joint.axis),
                        r(b.rotation), r(b.translation), r(b.mass), r(b.com), r(b.inertia)]
                       for b in self.bodies],
            "frames": sorted([f.name, f.body, r(f.rotation), r(f.translation)]
                             for f in self.frames.values()),
        }

    def fingerprint(self):
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()

    def __repr__(self):
        return (f"Robot({self.name!r}, nq={self.nq}, nv={self.nv}, bodies={self.n_bodies}, "
                f"floating_base={self.floating_base})")
