"""Synthetic contact scenarios of the matrix-free paper (../shared/papers/001_a194bdf892a0cc2c.txt,
Table I and Fig. 2), built from a short spec string like the mechanisms of synthetic.py.

``swimmer:n=N``  (N >= 1, default 10)
    A planar chain of N links ``link0`` ... ``link{N-1}``: each link is a 0.2 m rod along
    its x axis (mass 1 kg, centre of mass at mid-link, rod inertia about it), each joint a
    revolute about z at its parent's tip.  The base ``link0`` floats on a 6-DoF free joint
    (the paper's swimmer has a 3-DoF planar base; this package has neither planar joints nor
    massless intermediate bodies to build one), so nv = N + 5.
    Default constraints: two 3D point contacts per link, ``link{i}:3d@0.05,0,-0.01`` and
    ``link{i}:3d@0.15,0,-0.01`` (m = 6N, the paper's n_c = 2N).

``boxes:n=N``  (N >= 1, default 5)
    A forest of N free-floating 0.2 m cubes ``box0`` ... ``box{N-1}`` (1 kg each, body
    origin at the cube's centre), stacked: nv = 6N.  Default constraints, the paper's 4
    contact points per touching pair: the bottom box ``box0`` touches the ground at its four
    lower corners, ``box0:3d@±0.1,±0.1,-0.1``, and each box k ≥ 1 touches the one below at
    its four lower corners, link-to-link ``box{k}|box{k-1}:3d@±0.1,±0.1,-0.1;±0.1,±0.1,0.1``
    (m = 12N, twice nv: the Delassus matrix is rank-deficient, as in the paper).

``pyramid:layers=L``  (L >= 1, default 4: the paper's box pyramid, 30 boxes)
    A forest of free-floating 0.2 m cubes (as ``boxes``) stacked as a square pyramid: layer
    k = 0 .. L-1 (0 on the ground) holds (L-k)² boxes ``box{k}_{i}_{j}`` side by side, each
    box of layer k ≥ 1 centred over the corner where four boxes of layer k-1 meet; nv = 6·Σ(L-k)².
    Default constraints, the paper's 4 contact points per touching pair: every bottom box
    touches the ground at its four lower corners, ``box0_{i}_{j}:3d@±0.1,±0.1,-0.1``, and each
    box above rests on a quarter of each of the four boxes below it, touching it at the corners
    of that 0.1 m square, link-to-link ``box{k}_{i}_{j}|box{k-1}_{i+di}_{j+dj}:3d@a;b`` (a on
    the upper box's bottom face, b the same point on the lower box's top face).  L = 4 is the
    paper's pyramid: 30 boxes, nv = 180, 64 + 14·16 = 288 contacts, m = 864.

:func:`parse_contact_synthetic` returns ``(robot, default_constraint_specs)``.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import ModelError
from .robot import Body, Joint, Robot

CONTACT_MECHANISMS = {"swimmer": {"n": 10}, "boxes": {"n": 5}, "pyramid": {"layers": 4}}
MAX_BODIES = 5000
_SPEC = re.compile(r"^\s*(?P<mech>[A-Za-z]+)\s*(?::(?P<rest>.*))?$")

LINK = 0.2          # swimmer link length (m)
SIDE = 0.2          # box side (m)


def is_contact_synthetic(spec) -> bool:
    """True when ``spec`` names one of CONTACT_MECHANISMS (``swimmer:n=10``, or bare ``boxes``)."""
    if not isinstance(spec, str):
        return False
    m = _SPEC.match(spec)
    return bool(m) and m["mech"].lower() in CONTACT_MECHANISMS


def _params(spec):
    m = _SPEC.match(spec)
    mech = m["mech"].lower()
    params = dict(CONTACT_MECHANISMS[mech])
    rest = (m["rest"] or "").strip()
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = (t.strip() for t in item.partition("="))
        if not eq or key.lower() not in params:
            raise ModelError(f"bad synthetic spec {spec!r}: expected {mech}:{_usage(mech)}, got {item!r}")
        try:
            params[key.lower()] = int(value)
        except ValueError:
            raise ModelError(f"bad synthetic spec {spec!r}: {key} must be an integer, got {value!r}") from None
    for key, value in params.items():
        if value < 1:
            raise ModelError(f"bad synthetic spec {spec!r}: {key} must be at least 1")
    if _n_bodies(mech, params) > MAX_BODIES:
        raise ModelError(f"bad synthetic spec {spec!r}: more than {MAX_BODIES} bodies")
    return mech, params


def _usage(mech):
    return ",".join(f"{k}=N" for k in CONTACT_MECHANISMS[mech])


def _n_bodies(mech, params):
    if mech == "pyramid":
        return sum(k * k for k in range(1, params["layers"] + 1))
    return params["n"]


def _rod(length, mass=1.0, radius=0.02):
    """Rotational inertia about the centre of mass of a rod along x."""
    return np.diag([mass * radius ** 2 / 2, mass * length ** 2 / 12, mass * length ** 2 / 12])


def swimmer(n):
    bodies = []
    for i in range(n):
        free = i == 0
        bodies.append(Body(
            name=f"link{i}", parent=i - 1,
            joint=Joint("root_joint" if free else f"joint{i}", "free" if free else "revolute",
                        None if free else np.array([0.0, 0.0, 1.0])),
            rotation=np.eye(3), translation=np.zeros(3) if free else np.array([LINK, 0.0, 0.0]),
            mass=1.0, com=np.array([LINK / 2, 0.0, 0.0]), inertia=_rod(LINK)))
    specs = [f"link{i}:3d@{x},0,-0.01" for i in range(n) for x in (0.05, 0.15)]
    return Robot(f"swimmer_n{n}", bodies, source=f"swimmer:n={n}"), specs


def _box(name):
    """A free 1 kg cube of side SIDE, body origin at its centre."""
    return Body(name=name, parent=-1, joint=Joint(f"{name}_joint", "free"), rotation=np.eye(3),
                translation=np.zeros(3), mass=1.0, com=np.zeros(3), inertia=np.eye(3) * SIDE ** 2 / 6)


def boxes(n):
    I = np.eye(3) * (SIDE ** 2 + SIDE ** 2) / 12
    bodies = [Body(name=f"box{k}", parent=-1, joint=Joint(f"box{k}_joint", "free"),
                   rotation=np.eye(3), translation=np.zeros(3), mass=1.0, com=np.zeros(3), inertia=I)
              for k in range(n)]
    h = SIDE / 2
    corners = [(sx * h, sy * h) for sx in (1, -1) for sy in (1, -1)]
    specs = [f"box0:3d@{x:g},{y:g},{-h:g}" for x, y in corners]
    specs += [f"box{k}|box{k - 1}:3d@{x:g},{y:g},{-h:g};{x:g},{y:g},{h:g}" for k in range(1, n) for x, y in corners]
    return Robot(f"boxes_n{n}", bodies, source=f"boxes:n={n}"), specs


def _resting_contacts(k, i, j):
    """The 16 contacts of box (k, i, j) with the four boxes (k-1, i+di, j+dj) below it: box
    (k-1, i+di, ·) lies SIDE·(di − ½) along x from it, so they overlap on x ∈ [−h, 0] (di = 0)
    or [0, h] (di = 1) of the upper box, likewise in y."""
    h = SIDE / 2
    specs = []
    for di in (0, 1):
        for dj in (0, 1):
            for x in ((-h, 0) if di == 0 else (0, h)):
                for y in ((-h, 0) if dj == 0 else (0, h)):
                    bx, by = x + SIDE * (0.5 - di), y + SIDE * (0.5 - dj)       # in the lower box
                    specs.append(f"box{k}_{i}_{j}|box{k - 1}_{i + di}_{j + dj}:3d@{x:g},{y:g},{-h:g};{bx:g},{by:g},{h:g}")
    return specs


def pyramid(layers):
    boxes_ = [(k, i, j) for k in range(layers) for i in range(layers - k) for j in range(layers - k)]
    bodies = [_box(f"box{k}_{i}_{j}") for k, i, j in boxes_]
    h = SIDE / 2
    specs = [f"box0_{i}_{j}:3d@{sx * h:g},{sy * h:g},{-h:g}"
             for _, i, j in boxes_[:layers * layers] for sx in (1, -1) for sy in (1, -1)]
    specs += [s for k, i, j in boxes_[layers * layers:] for s in _resting_contacts(k, i, j)]
    return Robot(f"pyramid_l{layers}", bodies, source=f"pyramid:layers={layers}"), specs


def parse_contact_synthetic(spec):
    """(robot, default constraint specs) for a CONTACT_MECHANISMS spec."""
    if not is_contact_synthetic(spec):
        raise ModelError(f"bad synthetic spec {spec!r}: expected one of "
                         f"{', '.join(f'{k}:{_usage(k)}' for k in CONTACT_MECHANISMS)}")
    mech, p = _params(spec)
    return {"swimmer": swimmer, "boxes": boxes, "pyramid": pyramid}[mech](**p)
