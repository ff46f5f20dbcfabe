"""The kinematic tree every algorithm reads: bodies in Pinocchio's depth-first order, each
hanging on one joint from its parent, with numeric (cleaned) geometry and inertia.

Frames follow Featherstone: a body's coordinates are its joint frame after the joint's
motion.  ``Body.rotation``/``Body.translation`` are the tree transform X_T from the parent
body to the joint frame before motion, stored compactly: ``rotation`` E maps parent
coordinates to joint-frame coordinates, ``translation`` r is the joint-frame origin in
parent coordinates.

For model loaders (URDF, SDF, spatial_v2, and MJCF compiled by MuJoCo): every joint moves its
body about the body's origin (a revolute axis and a ball joint's centre pass through it, a free
joint's q is its pose), so a body frame is its joint's frame: a body whose joint sits elsewhere
in it (MuJoCo's joint pos) is given a frame there, its inertia and sites re-expressed, and
several joints in one body become a chain of massless bodies.  Named frames (``Frame``: links
merged by fixed joints, MuJoCo sites) hang on bodies.  ``Joint.quaternion`` / ``Joint.velocity`` give q's and v's layout per joint (MuJoCo's:
"wxyz", "mujoco"), ``Robot(armature=...)`` the rotor inertias (MuJoCo's dof_armature), and
``Robot(convention="mujoco")`` labels a robot without free or ball joints.  A massless body (a
virtual link) is fine wherever the mass matrix stays positive definite (``_check_mass_matrix``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
import os
from typing import NamedTuple, TypeAlias

import numpy.typing as npt

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


QUATERNION_ORDERS = ("xyzw", "wxyz")
VELOCITY_CONVENTIONS = ("local", "mujoco")


def quaternion_matrix(x, y, z, w):
    """The rotation (rows of 3 entries, body -> parent) of a unit quaternion; plain arithmetic,
    so the entries may be numbers or CasADi SX (frames.py builds the SX rotation from it)."""
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]


@dataclass
class Joint:
    """A joint and its coordinates.

    ``kind``: 'free' (6 DoF), 'ball' (spherical, 3 DoF), 'revolute', 'continuous' (revolute
    stored as (cos, sin) in q, as Pinocchio's unbounded revolute) or 'prismatic' (along
    ``axis``, which revolute joints turn about).

    Conventions of q and v (the interface model loaders build on):

    - ``quaternion`` (free and ball joints): the order of the unit quaternion in q, "xyzw"
      (Pinocchio; the default, URDF/SDF/spatial_v2/synthetic models) or "wxyz" (MuJoCo's qpos).
      A free joint's q is [position (3), quaternion (4)], a ball joint's [quaternion (4)]; the
      quaternion turns body coordinates into the joint frame's (the parent's for a free root).
    - ``velocity``: "local" (Pinocchio; default) or "mujoco" (MuJoCo's qvel).  They differ only
      for a free joint: "local" is [v; ω], the body origin's linear velocity and the angular
      velocity, both in body coordinates; "mujoco" is [ṗ; ω] with ṗ the body origin's linear
      velocity in the parent (world) frame and ω in body coordinates.  v, τ and v̇ (and rnea's a)
      follow the joint's convention exactly: a MuJoCo user passes data.qvel and
      data.qfrc_applied and gets data.qacc's v̇ (d/dt of [ṗ; ω]).  A ball joint's v is ω in
      body coordinates in both (S = [1₃; 0], Featherstone's [angular; linear] order)."""
    name: str
    kind: str
    axis: np.ndarray | None = None
    quaternion: str = "xyzw"
    velocity: str = "local"
    # a URDF <mimic>: {"joint", "multiplier", "offset"}, shown by `links`; the joint stays an
    # independent DoF (as Pinocchio's mimic=False), so it is no part of the model's identity
    mimic: dict | None = None

    NQ = {"free": 7, "ball": 4, "revolute": 1, "continuous": 2, "prismatic": 1}
    NV = {"free": 6, "ball": 3, "revolute": 1, "continuous": 1, "prismatic": 1}
    AXIAL = ("revolute", "continuous", "prismatic")      # the kinds that need an axis

    @property
    def nq(self):
        return self.NQ[self.kind]

    @property
    def nv(self):
        return self.NV[self.kind]

    @property
    def quaternion_start(self):
        """Where the unit quaternion starts in this joint's q (None: no quaternion)."""
        return {"free": 3, "ball": 0}.get(self.kind)

    def quaternion_xyzw(self, qj):
        """(x, y, z, w) from this joint's q entries ``qj`` (any indexable: numbers or SX)."""
        k = self.quaternion_start
        x = [qj[k + i] for i in range(4)]
        return tuple(x) if self.quaternion == "xyzw" else (x[1], x[2], x[3], x[0])

    @property
    def mujoco_velocity(self):
        """Whether v's linear part is in the parent frame (a free joint in MuJoCo's convention)."""
        return self.kind == "free" and self.velocity == "mujoco"

    def motion_subspace(self):
        """S (6 x nv) in the body frame, Featherstone [angular; linear] order, for the joint's
        own ("local") velocity coordinates."""
        if self.kind == "free":
            # Pinocchio's free-flyer velocity is [linear; angular] in the body frame.
            return np.block([[np.zeros((3, 3)), np.eye(3)], [np.eye(3), np.zeros((3, 3))]])
        if self.kind == "ball":
            return np.vstack([np.eye(3), np.zeros((3, 3))])
        s = np.zeros((6, 1))
        if self.kind == "prismatic":
            s[3:, 0] = self.axis
        else:
            s[:3, 0] = self.axis
        return s

    def motion(self, qj):
        """(E_J, p_J) numeric: E_J turns the joint frame's coordinates into the body's, p_J is
        the body origin in the joint frame (the model check's kinematics; frames.py has the SX
        transforms)."""
        if self.kind in ("free", "ball"):
            x = np.array(self.quaternion_xyzw(qj), float)
            R = np.array(quaternion_matrix(*(x / np.linalg.norm(x))))
            return R.T, (np.asarray(qj[:3], float) if self.kind == "free" else np.zeros(3))
        if self.kind == "prismatic":
            return np.eye(3), self.axis * qj[0]
        c, s = (np.cos(qj[0]), np.sin(qj[0])) if self.kind == "revolute" else (qj[0], qj[1])
        A = cross_matrix(self.axis)
        return (np.eye(3) + s * A + (1 - c) * A @ A).T, np.zeros(3)


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


# What the public functions take as a robot: a Robot, or anything load_robot reads (a registry name, a model file, URDF
# text, a synthetic spec)
RobotLike: TypeAlias = "Robot | str | os.PathLike[str]"


class Placement(NamedTuple):
    """A frame's placement in the world: ``rotation`` (3 x 3, frame to world) and ``translation`` (3,)."""
    rotation: np.ndarray
    translation: np.ndarray


def cross_matrix(v):
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class Robot:
    """A kinematic tree (or forest) of rigid bodies with numeric parameters.

    ``armature`` (nv,): rotor inertia per DoF, added to the joint-space inertia's diagonal in
    the joints' own velocity coordinates (Pinocchio's ``model.armature``, MuJoCo's
    ``dof_armature``); zeros by default (see the ``armature`` property).  ``convention`` names
    the q layout of a robot without free or ball joints ("pinocchio" or "mujoco": the loader's
    format); with them, ``q_convention`` is read off their joints."""

    def __init__(self, name, bodies, frames=(), source=None, gravity=(0.0, 0.0, -9.81), armature=None,
                 convention="pinocchio"):
        self.name = name
        self.bodies = list(bodies)
        self.source = source
        self.gravity = np.asarray(gravity, dtype=float)
        self.scenarios = {}             # name -> constraint specs (registry robots)
        self.model_file = None          # the resolved path when loaded from a model file
        self.coupling = None            # model/mimic.py's Coupling when mimic joints are coupled
        if convention not in CONVENTIONS:
            raise ModelError(f"robot {name!r}: unknown q convention {convention!r} (expected one of {CONVENTIONS})")
        self.convention = convention
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
        self._armature = np.zeros(self.nv)
        self._armature.flags.writeable = False
        self._singular_bodies = self._check_inertias()
        if armature is not None:
            self.armature = armature
        elif self._singular_bodies:
            self._check_mass_matrix()

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
            j = b.joint
            if j.kind not in Joint.NQ:
                raise ModelError(f"joint {j.name!r}: unsupported type {j.kind!r}")
            if j.kind in Joint.AXIAL and (j.axis is None or np.linalg.norm(j.axis) < 1e-12):
                raise ModelError(f"joint {j.name!r} has a zero axis")
            if j.quaternion not in QUATERNION_ORDERS:
                raise ModelError(f"joint {j.name!r}: unknown quaternion order {j.quaternion!r} "
                                 f"(expected one of {QUATERNION_ORDERS})")
            if j.velocity not in VELOCITY_CONVENTIONS:
                raise ModelError(f"joint {j.name!r}: unknown velocity convention {j.velocity!r} "
                                 f"(expected one of {VELOCITY_CONVENTIONS})")

    def _check_inertias(self):
        """The bodies whose own inertia is singular (a point mass, a massless link); a ModelError
        for one that no rigid body has (negative mass, a rotational inertia that is not positive
        semi-definite)."""
        singular = []
        for i, b in enumerate(self.bodies):
            eig = np.linalg.eigvalsh(0.5 * (b.inertia + b.inertia.T))
            if b.mass < 0 or eig.min() < -1e-9 * max(abs(eig).max(), 1e-300):
                raise ModelError(
                    f"moving body {b.name!r} has no valid rigid-body inertia (mass {b.mass:g}, principal moments "
                    f"{np.round(eig, 12).tolist()}: a mass and moments must not be negative)")
            if not (b.mass > 0 and eig.min() > 0):
                singular.append(i)
        return singular

    def _check_mass_matrix(self, samples=3, seed=0):
        """M(q) positive definite, when some body's own inertia is singular: for a tree, M > 0
        exactly when every articulated joint inertia D_i = S_iᵀ H_i^A S_i (+ armature) is, from
        the leaves.  Checked at ``samples`` seeded random q: a ModelError naming the joints whose
        D_i is singular at all of them (nothing they move carries inertia along them)."""
        rng = np.random.default_rng(seed)
        flagged = None
        for _ in range(samples):
            bad = set(self._singular_joints(self.random_q(rng)))
            flagged = bad if flagged is None else flagged & bad
        if flagged:
            names = [f"{self.bodies[i].joint.name!r} (body {self.bodies[i].name!r})" for i in sorted(flagged)]
            raise ModelError(
                f"robot {self.name!r}: the mass matrix is singular: joint{'s' if len(names) > 1 else ''} "
                f"{', '.join(names)} carr{'y' if len(names) > 1 else 'ies'} no inertia (what moves with "
                f"{'them' if len(names) > 1 else 'it'} is massless, or its mass lies on the joint axis); "
                f"give it mass or armature, or make the joint fixed")

    def _singular_joints(self, q, rcond=1e-10):
        """The bodies whose articulated joint inertia D_i is singular at q (plain 6x6 NumPy,
        leaves first): λmin(D_i) ≤ rcond · λmax of the composite inertia's D (what D_i would be
        with the joints below locked), or ≤ 1e-3 · rcond of the largest of those."""
        n = self.n_bodies
        HA = [b.spatial_inertia() for b in self.bodies]
        Ic = [H.copy() for H in HA]
        low, high = [0.0] * n, [0.0] * n
        for i in reversed(range(n)):
            b = self.bodies[i]
            S, arm = b.joint.motion_subspace(), np.diag(self._armature[b.v_index:b.v_index + b.joint.nv])
            U = HA[i] @ S
            D = S.T @ U + arm
            low[i] = np.linalg.eigvalsh(0.5 * (D + D.T)).min()
            high[i] = max(np.linalg.eigvalsh(S.T @ Ic[i] @ S + arm).max(), 0.0)
            if b.parent >= 0:
                E_J, p_J = b.joint.motion(q[b.q_index:b.q_index + b.joint.nq])
                E = E_J @ b.rotation
                X = np.zeros((6, 6))
                X[:3, :3] = X[3:, 3:] = E
                X[3:, :3] = -E @ cross_matrix(b.translation + b.rotation.T @ p_J)
                HA[b.parent] = HA[b.parent] + X.T @ (HA[i] - U @ np.linalg.pinv(D) @ U.T) @ X
                Ic[b.parent] = Ic[b.parent] + X.T @ Ic[i] @ X
        top = max(high)
        return [i for i in range(n) if low[i] <= rcond * max(high[i], 1e-3 * top) or high[i] == 0]

    @property
    def armature(self):
        """Rotor inertia per DoF (nv,), read-only; set ``robot.armature = x`` with x a number
        (on every DoF of every joint but free ones) or nv numbers: finite, non-negative."""
        return self._armature

    @armature.setter
    def armature(self, value):
        if np.ndim(value) == 0:
            a = np.zeros(self.nv)
            for b in self.bodies:
                if b.joint.kind != "free":
                    a[b.v_index:b.v_index + b.joint.nv] = check_numbers(value, "armature", f"robot {self.name!r}: ")
        else:
            a = np.array(check_numbers(value, "armature", f"robot {self.name!r}: "), float).reshape(-1)
            if np.ndim(value) != 1 or a.size != self.nv:
                raise ModelError(f"robot {self.name!r}: armature needs a number or nv = {self.nv} numbers, "
                                 f"got shape {np.shape(value)}")
        if np.any(a < 0):
            raise ModelError(f"robot {self.name!r}: armature must not be negative (dof {int(np.argmin(a))}: "
                             f"{a.min():g})")
        for b in self.bodies:
            lin = a[b.v_index:b.v_index + 3]
            if b.joint.mujoco_velocity and not np.all(lin == lin[0]):
                raise ModelError(f"robot {self.name!r}: joint {b.joint.name!r} (MuJoCo velocities) needs one "
                                 f"armature on its three linear DoFs, got {lin.tolist()}")
        a = clean(a)
        a.flags.writeable = False
        old, self._armature = self._armature, a
        if self._singular_bodies:
            try:
                self._check_mass_matrix()
            except ModelError:
                self._armature = old
                raise

    @property
    def n_bodies(self):
        return len(self.bodies)

    @property
    def floating_base(self):
        return self.bodies[0].joint.kind == "free"

    @property
    def joint_names(self):
        return [b.joint.name for b in self.bodies]

    @property
    def q_convention(self):
        """Which layout q and v follow: "pinocchio" (quaternions x, y, z, w; free-joint
        velocities local), "mujoco" (qpos/qvel: w, x, y, z; free-joint linear velocities in the
        world), or "mixed"; a robot without free or ball joints: the loader's ``convention``."""
        seen = set()
        for b in self.bodies:
            j = b.joint
            if j.quaternion_start is not None:
                pin = j.quaternion == "xyzw" and not j.mujoco_velocity
                mj = j.quaternion == "wxyz" and (j.kind != "free" or j.mujoco_velocity)
                seen.add("pinocchio" if pin else "mujoco" if mj else "mixed")
        return self.convention if not seen else seen.pop() if len(seen) == 1 else "mixed"

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

    def frame_placement(self, q: npt.ArrayLike, name: str) -> Placement:
        """Forward kinematics: the world placement of body or frame ``name`` at ``q``, as a
        Placement (``rotation``: frame axes as columns in the world, ``translation``: its origin;
        Pinocchio's ``data.oMf`` after ``updateFramePlacements``).  Plain NumPy, one product per
        ancestor, from the joints' own motion (Joint.motion) and tree transforms."""
        f = self.frame(name)
        q = self.check_q(q)
        if not np.all(np.isfinite(q)):
            from ..errors import InputError
            raise InputError(f"q has a non-finite entry: {q.tolist()}")
        R, p = np.eye(3), np.zeros(3)
        for i in reversed(self.ancestors(f.body)):          # root first
            b = self.bodies[i]
            E_J, p_J = b.joint.motion(q[b.q_index:b.q_index + b.joint.nq])
            # ^iX_λ(i): E = E_J E_T maps parent to body coordinates, the body origin sits at r_T + E_Tᵀ p_J
            p = p + R @ (b.translation + b.rotation.T @ p_J)
            R = R @ (E_J @ b.rotation).T
        return Placement(R @ f.rotation, p + R @ f.translation)

    def coordinate_names(self) -> tuple[list[str], list[str]]:
        """(q names, v names), one per entry, by joint: a root free joint's q is ``x y z`` and its
        quaternion in the model's order (``qx qy qz qw`` for Pinocchio's), its v ``x y z rx ry rz``;
        other free and ball joints prefix those with their joint's name and a dot; a continuous
        joint's q is ``<joint>.cos <joint>.sin``; every other entry is the joint's name."""
        qn, vn = [], []
        for i, b in enumerate(self.bodies):
            j = b.joint
            pre = "" if i == 0 else f"{j.name}."
            if j.quaternion_start is not None:
                quat = [f"q{c}" for c in j.quaternion]
                qn += [pre + n for n in (["x", "y", "z"] if j.kind == "free" else []) + quat]
                vn += [pre + n for n in (["x", "y", "z"] if j.kind == "free" else []) + ["rx", "ry", "rz"]]
            else:
                qn += [f"{j.name}.cos", f"{j.name}.sin"] if j.kind == "continuous" else [j.name]
                vn.append(j.name)
        return qn, vn

    # -- configurations --------------------------------------------------------------
    def q_layout(self):
        """Per joint: name, body, kind, q and v slices, and for free and ball joints the
        quaternion order and velocity convention (the manifests' q layout; ``neutral_q`` and
        ``random_q`` below read nothing else)."""
        out = []
        for b in self.bodies:
            j = b.joint
            entry = {"joint": j.name, "body": b.name, "kind": j.kind, "q_index": b.q_index, "nq": j.nq,
                     "v_index": b.v_index, "nv": j.nv}
            if j.quaternion_start is not None:
                entry |= {"quaternion": j.quaternion, "velocity": j.velocity}
            out.append(entry)
        return out

    def random_q(self, rng, n=None):
        """A random configuration (see :func:`random_q`), or ``n`` of them as an n x nq array
        (drawn joint by joint for all n at once: a batch's input without a Python loop)."""
        return random_q(self.q_layout(), rng, n)

    def neutral_q(self):
        return neutral_q(self.q_layout())

    def perturbed_q(self, q, delta, rng):
        """q + δ N(0, 1) on the revolute and prismatic joints (the others kept)."""
        q = np.array(q, dtype=float)
        for b in self.bodies:
            if b.joint.kind in ("revolute", "prismatic"):
                q[b.q_index] += delta * rng.normal()
        return q

    def check_q(self, q: npt.ArrayLike) -> np.ndarray:
        from ..errors import InputError
        try:
            q = np.asarray(q, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InputError(f"q must be {self.nq} numbers, got {q!r:.80}") from None
        if q.size != self.nq:
            raise InputError(f"q has {q.size} entries, robot {self.name!r} needs nq = {self.nq}")
        return q

    # -- identity --------------------------------------------------------------------
    def describe(self):
        """Everything that determines generated code, as plain data (for hashing)."""
        def r(a):
            return np.round(np.asarray(a, float), 15).tolist()

        def joint(j):
            # the conventions only where they differ from the defaults: a model's identity as before
            return [j.name, j.kind] + ([j.quaternion, j.velocity] if (j.quaternion, j.velocity) != ("xyzw", "local")
                                       else [])
        out = {
            "name": self.name,
            "gravity": r(self.gravity),
            "bodies": [[b.name, b.parent, *joint(b.joint),
                        None if b.joint.axis is None else r(b.joint.axis),
                        r(b.rotation), r(b.translation), r(b.mass), r(b.com), r(b.inertia)]
                       for b in self.bodies],
            "frames": sorted([f.name, f.body, r(f.rotation), r(f.translation)]
                             for f in self.frames.values()),
        }
        if np.any(self._armature):
            out["armature"] = r(self._armature)
        if self.convention != "pinocchio":
            out["convention"] = self.convention
        if self.coupling is not None:
            out["mimic_coupling"] = self.coupling.describe()
        return out

    def fingerprint(self):
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()

    def base_change(self, python=False):
        """How to get the other base, where the model's format lets the user choose (URDF):
        ``--fixed-base fixes it to the world`` (``python``: ``floating_base=False …``), else None."""
        if getattr(self, "model_format", None) != "urdf":
            return None
        other = not self.floating_base
        how = f"floating_base={other}" if python else f"--{'floating' if other else 'fixed'}-base"
        return f"{how} {'puts it on a free joint' if other else 'fixes it to the world'}"

    def base_note(self):
        """Which base the robot has and how to change it (or where it is set), in one phrase:
        what every command says first, and the manifest's ``base``."""
        kind = "floating base (a free joint at the root)" if self.floating_base else \
            "fixed base (the root welded to the world)"
        change = self.base_change()
        if change:
            return f"{kind}; {change}"
        where = {"synthetic": "the spec", None: "the Robot"}.get(getattr(self, "model_format", None), "the model")
        return f"{kind}, set in {where}"

    def __repr__(self):
        change = self.base_change(python=True)
        return (f"Robot({self.name!r}, nq={self.nq}, nv={self.nv}, bodies={self.n_bodies}, "
                f"floating_base={self.floating_base}{'; ' + change if change else ''})")


CONVENTIONS = ("pinocchio", "mujoco")


# -- configurations from a q layout (Robot.q_layout, or a manifest's) -------------------------------
def _quaternion_slice(j):
    """(first q index of the quaternion, whether it is stored w first) of a layout entry, or None."""
    start = {"free": 3, "ball": 0}.get(j["kind"])
    return None if start is None else (j["q_index"] + start, j.get("quaternion", "xyzw") == "wxyz")


def unit_blocks(layout):
    """(joint name, q slice, what) for every block of q that must have norm 1: quaternions
    (in their order) and continuous joints' (cos, sin)."""
    for j in layout:
        quat = _quaternion_slice(j)
        if quat is not None:
            yield j["joint"], slice(quat[0], quat[0] + 4), f"quaternion ({'w, x, y, z' if quat[1] else 'x, y, z, w'})"
        elif j["kind"] == "continuous":
            yield j["joint"], slice(j["q_index"], j["q_index"] + 2), "(cos, sin) pair"


def neutral_q(layout):
    """q₀ (Pinocchio's neutral): zero joint angles and offsets, the identity orientation (and the
    origin) for free and ball joints, (cos, sin) = (1, 0) for a continuous one."""
    q = np.zeros(sum(j["nq"] for j in layout))
    for j in layout:
        quat = _quaternion_slice(j)
        if quat is not None:
            q[quat[0] + (0 if quat[1] else 3)] = 1.0
        elif j["kind"] == "continuous":
            q[j["q_index"]] = 1.0
    return q


def random_q(layout, rng, n=None):
    """A random q: uniform angles in [−π, π], prismatic offsets in [−0.5, 0.5], free positions
    in [−1, 1]³, uniformly random unit quaternions (drawn as x, y, z, w whatever their order in q,
    so both orders give the same rotations from one generator); ``n`` of them as rows of an
    n x nq array (n None: one q, the same draws as n = 1)."""
    rows = 1 if n is None else int(n)
    q = np.zeros((rows, sum(j["nq"] for j in layout)))
    for j in layout:
        k, kind, quat = j["q_index"], j["kind"], _quaternion_slice(j)
        if quat is not None:
            x = rng.normal(size=(rows, 4))
            if kind == "free":
                q[:, k:k + 3] = rng.uniform(-1, 1, (rows, 3))
            x = x / np.linalg.norm(x, axis=1, keepdims=True)
            q[:, quat[0]:quat[0] + 4] = np.roll(x, 1, axis=1) if quat[1] else x
        elif kind == "continuous":
            a = rng.uniform(-np.pi, np.pi, rows)
            q[:, k], q[:, k + 1] = np.cos(a), np.sin(a)
        elif kind == "revolute":
            q[:, k] = rng.uniform(-np.pi, np.pi, rows)
        else:
            q[:, k] = rng.uniform(-0.5, 0.5, rows)
    return q[0] if n is None else q
