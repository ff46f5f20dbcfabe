"""Synthetic mechanisms of the papers' scaling studies, built from a short spec string.

A spec is ``MECHANISM:key=value,key=value`` (integers only; spaces are ignored).
:func:`parse_synthetic` returns ``(robot, default_constraint_specs)``; the constraint specs
are strings for :meth:`casadi_delassus.constraints.ConstraintSet.parse`.

Mechanisms
----------
``chain:n=N[,floating=0][,all=0][,rot=0][,ball=0]``
    A serial chain of N revolute links ``link1`` ... ``linkN`` on a fixed base (link1
    hangs from the world).  ``floating=1`` puts link1 on a 6-DoF free joint instead.
    Default constraints: the tip weld ``linkN:6d`` (the PV paper's fixed-base chains with a
    6D-constrained end effector, its Fig. 4a).  ``all=1``: a 6D weld on every link, in
    order ``link1:6d ... linkN:6d`` (the PV-OSIMr paper's "chain with a 6D constraint on
    all its links", its Fig. 4b, m = 6n).  ``ball=K`` (K >= 1): links K, 2K, ... hang on
    ball (spherical, 3-DoF) joints instead (``ball=1``: every link; link1 too unless
    floating, so a ball joint at the root, in the middle and at the tip).
    nv = N (fixed) or N + 5 (floating), plus 2 per ball joint.

``ragdoll[:floating=1][,rot=0]``
    A humanoid-like tree of ball joints (Pinocchio's JointModelSpherical, MuJoCo's ``ball``):
    ``pelvis`` on a free joint (``floating=0``: on a ball joint from the world), ``torso``
    on a ball waist and ``head`` on a ball neck; per side s in (left, right) ``s_upper_arm``
    (ball shoulder on the torso), ``s_forearm`` (revolute elbow), ``s_hand`` (ball wrist),
    ``s_thigh`` (ball hip on the pelvis), ``s_shin`` (revolute knee), ``s_foot`` (ball ankle).
    Default constraints: both feet welded, ``left_foot:6d, right_foot:6d``.  15 bodies,
    nv = 40 (floating) or 37.

``stem:n=N,branches=B[,length=7][,floating=1][,rot=0]``
    The long-stemmed mechanism (PV-OSIMr paper Fig. 3a; PV paper Fig. 2e): a stem of N
    links ``stem1`` ... ``stemN`` and, from *each* of the two stem ends, B branches of
    ``length`` links.  Branch j at the ``stem1`` end is ``bj_left_1`` ... ``bj_left_L``,
    at the ``stemN`` end ``bj_right_1`` ... ``bj_right_L`` (with N = 1 all 2B branches
    leave stem1).  "B branches on either side" therefore means 2B branches and 2B tip
    welds: with B = 1 the mechanism is a serial chain with a weld at each end, as the
    PV-OSIMr paper says.  The stem's first link is the floating base (6-DoF free joint),
    as in the papers' implementation; ``floating=0`` hangs it on a revolute joint from the
    world instead.  Default constraints: every branch tip welded, ``bj_left_L:6d`` for j =
    1..B then ``bj_right_L:6d``.  Bodies: N + 2·B·L; nv = N + 5 + 2·B·L (floating).

``kchain:k=K[,floating=0][,rot=0]``
    The k² chain (PV-OSIMr paper Fig. 4a): a serial chain of K² revolute links
    ``link1`` ... ``link{K²}`` on a fixed base (the paper counts n = d = k², one DoF per
    body; ``floating=1`` makes link1 a free-floating base), with the links k, 2k, ..., k²
    welded: ``link{k}:6d, link{2k}:6d, ..., link{k²}:6d`` (m = 6k).

``ladder:rungs=R[,length=7][,segment=3][,floating=0][,rot=0]``
    The ladder of the PV paper (its Fig. 4b), as a tree plus welds to the world: one side
    rail is a chain ``rail1`` ... ``rail{segment·R}`` hanging from the world (fixed base;
    ``floating=1`` makes rail1 a free-floating base); rung j is a chain of ``length`` links
    ``rungj_1`` ... ``rungj_L`` branching off ``rail{segment·j}``, so consecutive rungs
    (the world being "rung 0") are joined on the rail side by ``segment`` links.  The
    rungs' other ends are welded to the world: default constraints ``rungj_L:6d`` for
    j = 1..R (m = 6R ~ n).  Bodies: R·(segment + length).

Rank: Λ⁻¹ is only positive semi-definite when a weld has fewer than 6 joints between it
and the previous weld or base (``chain`` with n < 6 or ``all=1``, ``kchain`` with k < 6,
branches or rungs shorter than 6 links): fine for computing Λ⁻¹ and counting its
operations, as the papers do, but not for algorithms that factorize it.  The defaults
(``length=7``) and ``kchain`` with k >= 6 give a full-rank Λ⁻¹.

Geometry and inertia (all mechanisms)
-------------------------------------
Reproducible and deliberately non-degenerate, so no accidental zero or one changes the
operation counts.  Every body draws its numbers from a generator seeded by the mechanism
and its own name (``crc32("chain/link7")``), so a body is the same in ``chain:n=5`` and
``chain:n=50``:

* joint axes are coordinate axes cycling x, y, z along every chain (link i of a chain:
  ``"xyz"[(i-1) % 3]``; branch/rung links are shifted by the branch index so siblings
  differ), never all parallel;
* a link of length L ∈ [0.2, 0.4] m extends mainly along the coordinate axis after its
  joint axis (x → y → z → x) with off-axis components of 5–15 % of L (random signs);
  each child joint sits at its parent's tip plus a per-child offset of up to 1 cm;
  a fixed-base root's joint sits at about (0, 0, 0.1) m; a free root has an identity
  placement, as Pinocchio's root joint;
* joint-frame rotations are the identity (as in the papers' implementation of the stem
  mechanism); ``rot=1`` draws a random rotation per joint frame instead;
* mass ∈ [0.5, 2.0] kg; centre of mass at mid-link plus an off-axis offset up to 2 cm;
  rotational inertia about the centre of mass from a rod-like mass distribution
  (second moments L²/12 along the link, (0.02–0.05 m)²/4 across it) turned by a random
  rotation of 0.2–0.6 rad: a full (non-diagonal), symmetric positive-definite matrix that
  satisfies the triangle inequality.
"""
from __future__ import annotations

import re
import zlib

import numpy as np

from ..errors import ModelError, unknown_name
from .robot import Body, Joint, Robot

# mechanism -> ordered {parameter: default}; None marks a required parameter
MECHANISMS = {
    "chain": {"n": None, "floating": 0, "all": 0, "rot": 0},
    "stem": {"n": None, "branches": None, "length": 7, "floating": 1, "rot": 0},
    "kchain": {"k": None, "floating": 0, "rot": 0},
    "ladder": {"rungs": None, "length": 7, "segment": 3, "floating": 0, "rot": 0},
    "ragdoll": {"floating": 1, "rot": 0},
}
MECHANISMS["chain"]["ball"] = 0             # after the others: canonical names as before
_FLAGS = ("floating", "all", "rot")
MAX_BODIES = 5000

_HEAD = re.compile(r"^[A-Za-z][\w-]*$")
_ITEM = re.compile(r"^\s*[A-Za-z_]\w*\s*=\s*[^,=]*$")
_INT = re.compile(r"^[+-]?\d+$")
_UNIT = np.eye(3)


def is_synthetic(spec) -> bool:
    """True when ``spec`` names a synthetic mechanism (``chain:n=5``, or a bare ``chain``),
    or has the ``word:key=value,...`` form of one (so a misspelt mechanism gets a helpful
    error from :func:`parse_synthetic` rather than being taken for a file or robot name)."""
    if not isinstance(spec, str):
        return False
    head, sep, rest = spec.strip().partition(":")
    head = head.strip()
    if head.lower() in MECHANISMS:
        return True
    return bool(sep and _HEAD.match(head) and rest.strip()
                and all(_ITEM.match(item) for item in rest.split(",")))


def parse_spec(spec):
    """(mechanism, {parameter: int}) with defaults filled in; ModelError when malformed."""
    if not isinstance(spec, str):
        raise ModelError(f"bad synthetic spec {spec!r}: expected a string like 'chain:n=20'")
    text = spec.strip()
    head, _, rest = text.partition(":")
    mech = head.strip().lower()
    if mech not in MECHANISMS:
        msg = unknown_name("synthetic mechanism", head.strip(), MECHANISMS)
        raise ModelError(f"{msg} (known: {', '.join(MECHANISMS)})")
    allowed = MECHANISMS[mech]
    given = {}
    if rest.strip():
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not eq or not key:
                raise ModelError(f"bad synthetic spec {spec!r}: expected key=value items, "
                                 f"got {item.strip()!r}")
            if key not in allowed:
                raise ModelError(f"bad synthetic spec {spec!r}: unknown parameter {key!r} for "
                                 f"{mech}; expected {', '.join(allowed)}")
            if key in given:
                raise ModelError(f"bad synthetic spec {spec!r}: parameter {key!r} given twice")
            if not _INT.match(value):
                raise ModelError(f"bad synthetic spec {spec!r}: {key} must be an integer, "
                                 f"got {value!r}")
            given[key] = int(value)
    params = {}
    for key, default in allowed.items():
        if key not in given and default is None:
            raise ModelError(f"bad synthetic spec {spec!r}: missing parameter {key!r} "
                             f"(usage: {usage(mech)})")
        value = given.get(key, default)
        if key in _FLAGS:
            if value not in (0, 1):
                raise ModelError(f"bad synthetic spec {spec!r}: {key} must be 0 or 1, got {value}")
        elif value < (0 if key == "ball" else 1):
            raise ModelError(f"bad synthetic spec {spec!r}: {key} must be >= {0 if key == 'ball' else 1}, got {value}")
        params[key] = value
    n = _n_bodies(mech, params)
    if n > MAX_BODIES:
        raise ModelError(f"bad synthetic spec {spec!r}: {n} bodies, more than the "
                         f"{MAX_BODIES} supported")
    return mech, params


def usage(mech):
    req = [f"{k}=N" for k, d in MECHANISMS[mech].items() if d is None]
    opt = [f"[,{k}={d}]" for k, d in MECHANISMS[mech].items() if d is not None]
    return f"{mech}:{','.join(req)}{''.join(opt)}"


def canonical_name(mech, params):
    """A file-system-safe robot name: required and non-default parameters, in order."""
    parts = [mech] + [f"{k}{v}" for k, v in params.items()
                      if MECHANISMS[mech][k] is None or MECHANISMS[mech][k] != v]
    return "_".join(parts)


def _n_bodies(mech, p):
    if mech == "chain":
        return p["n"]
    if mech == "stem":
        return p["n"] + 2 * p["branches"] * p["length"]
    if mech == "kchain":
        return p["k"] ** 2
    if mech == "ragdoll":
        return 15
    return p["rungs"] * (p["segment"] + p["length"])


# -- geometry ------------------------------------------------------------------------------

def _rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


class _Builder:
    """Adds bodies with the seeded, non-degenerate geometry described in the docstring."""

    def __init__(self, mech, rot):
        self.mech, self.rot = mech, bool(rot)
        self.bodies, self.tips = [], []

    def add(self, name, parent, axis_index, ball=False):
        """``axis_index`` 0/1/2 for a revolute joint about x/y/z (or the link's direction for a
        ball joint), None for a free joint."""
        rng = np.random.default_rng(zlib.crc32(f"{self.mech}/{name}".encode()))
        free = axis_index is None
        a = 2 if free else axis_index % 3
        along = (a + 1) % 3
        others = [k for k in range(3) if k != along]
        L = rng.uniform(0.2, 0.4)
        tip = np.zeros(3)
        tip[along] = L
        tip[others] = L * rng.uniform(0.05, 0.15, 2) * rng.choice([-1.0, 1.0], 2)
        jitter = rng.uniform(-0.01, 0.01, 3)
        if parent >= 0:
            translation = self.tips[parent] + jitter
        elif free:
            translation = np.zeros(3)
        else:
            translation = np.array([0.0, 0.0, 0.1]) + jitter
        if self.rot and not free:
            E = _rotation(rng.normal(size=3), rng.uniform(0.3, 2.5))
        else:
            E = np.eye(3)
            rng.normal(size=3), rng.uniform(0.3, 2.5)      # keep the draws aligned
        mass = rng.uniform(0.5, 2.0)
        com = 0.5 * tip + rng.uniform(-0.02, 0.02, 3)
        sigma2 = (rng.uniform(0.02, 0.05, 3) ** 2) / 4.0
        sigma2[along] = L * L / 12.0
        R = _rotation(rng.normal(size=3), rng.uniform(0.2, 0.6))
        second = mass * R @ np.diag(sigma2) @ R.T        # second moment of the mass
        inertia = np.trace(second) * np.eye(3) - second
        inertia = 0.5 * (inertia + inertia.T)
        joint = Joint("root_joint", "free") if free else Joint(f"{name}_joint", "ball") if ball else \
            Joint(f"{name}_joint", "revolute", _UNIT[a].copy())
        self.bodies.append(Body(name, parent, joint, E, translation, mass, com, inertia))
        self.tips.append(tip)
        return len(self.bodies) - 1

    def chain(self, names, parent, axis_offset=0, floating_first=False, ball=0):
        """A serial chain hanging from ``parent`` (every ``ball``-th link on a ball joint);
        returns the body indices."""
        out = []
        for i, name in enumerate(names):
            axis = None if (i == 0 and floating_first) else i + axis_offset
            parent = self.add(name, parent, axis, ball=bool(ball) and (i + 1) % ball == 0)
            out.append(parent)
        return out


def _chain(p, b):
    n = p["n"]
    b.chain([f"link{i}" for i in range(1, n + 1)], -1, floating_first=bool(p["floating"]), ball=p["ball"])
    links = range(1, n + 1) if p["all"] else [n]
    return [f"link{i}:6d" for i in links]


def _ragdoll(p, b):
    pelvis = b.add("pelvis", -1, None if p["floating"] else 2, ball=True)
    torso = b.add("torso", pelvis, 2, ball=True)
    b.add("head", torso, 2, ball=True)
    for k, side in enumerate(("left", "right")):
        arm = b.add(f"{side}_upper_arm", torso, k, ball=True)
        b.add(f"{side}_hand", b.add(f"{side}_forearm", arm, 1 + k), k, ball=True)
    for k, side in enumerate(("left", "right")):
        thigh = b.add(f"{side}_thigh", pelvis, 1 + k, ball=True)
        b.add(f"{side}_foot", b.add(f"{side}_shin", thigh, k), 2, ball=True)
    return ["left_foot:6d", "right_foot:6d"]


def _kchain(p, b):
    k = p["k"]
    b.chain([f"link{i}" for i in range(1, k * k + 1)], -1, floating_first=bool(p["floating"]))
    return [f"link{j * k}:6d" for j in range(1, k + 1)]


def _stem(p, b):
    n, nb, L = p["n"], p["branches"], p["length"]

    def branches(side, parent, offset):
        tips = []
        for j in range(1, nb + 1):
            names = [f"b{j}_{side}_{i}" for i in range(1, L + 1)]
            b.chain(names, parent, axis_offset=j + offset)
            tips.append(f"{names[-1]}:6d")
        return tips

    first = b.add("stem1", -1, None if p["floating"] else 0)
    left = branches("left", first, 0)
    last = first
    for i in range(2, n + 1):
        last = b.add(f"stem{i}", last, i - 1)
    right = branches("right", last, 1)
    return left + right


def _ladder(p, b):
    rungs, L, seg = p["rungs"], p["length"], p["segment"]
    specs, parent = [], -1
    for j in range(1, rungs + 1):
        for i in range((j - 1) * seg + 1, j * seg + 1):
            free = i == 1 and p["floating"]
            parent = b.add(f"rail{i}", parent, None if free else i - 1)
        names = [f"rung{j}_{k}" for k in range(1, L + 1)]
        b.chain(names, parent, axis_offset=j)
        specs.append(f"{names[-1]}:6d")
    return specs


_BUILD = {"chain": _chain, "kchain": _kchain, "stem": _stem, "ladder": _ladder, "ragdoll": _ragdoll}


def parse_synthetic(spec):
    """Build the mechanism of a spec string: ``(Robot, default_constraint_specs)``."""
    mech, params = parse_spec(spec)
    builder = _Builder(mech, params.get("rot", 0))
    constraints = _BUILD[mech](params, builder)
    canonical = f"{mech}:{','.join(f'{k}={v}' for k, v in params.items())}"
    robot = Robot(canonical_name(mech, params), builder.bodies, source=f"synthetic {canonical}")
    return robot, constraints
