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
    origin at the cube's centre), nv = 6N.  Default constraints: the bottom box ``box0``
    touches the ground at its four lower corners, ``box0:3d@±0.1,±0.1,-0.1`` (m = 12).
    The paper's stack also has 4 contact points between consecutive boxes; those are
    constraints between two bodies, which constraints.py does not express yet.

:func:`parse_contact_synthetic` returns ``(robot, default_constraint_specs)``.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import ModelError
from .robot import Body, Joint, Robot

CONTACT_MECHANISMS = {"swimmer": {"n": 10}, "boxes": {"n": 5}}
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
            raise ModelError(f"bad synthetic spec {spec!r}: expected {mech}:n=N, got {item!r}")
        try:
            params[key.lower()] = int(value)
        except ValueError:
            raise ModelError(f"bad synthetic spec {spec!r}: {key} must be an integer, got {value!r}") from None
    if not 1 <= params["n"] <= MAX_BODIES:
        raise ModelError(f"bad synthetic spec {spec!r}: n must be between 1 and {MAX_BODIES}")
    return mech, params


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


def boxes(n):
    I = np.eye(3) * (SIDE ** 2 + SIDE ** 2) / 12
    bodies = [Body(name=f"box{k}", parent=-1, joint=Joint(f"box{k}_joint", "free"),
                   rotation=np.eye(3), translation=np.zeros(3), mass=1.0, com=np.zeros(3), inertia=I)
              for k in range(n)]
    h = SIDE / 2
    specs = [f"box0:3d@{sx * h:g},{sy * h:g},{-h:g}" for sx in (1, -1) for sy in (1, -1)]
    return Robot(f"boxes_n{n}", bodies, source=f"boxes:n={n}"), specs


def parse_contact_synthetic(spec):
    """(robot, default constraint specs) for a CONTACT_MECHANISMS spec."""
    if not is_contact_synthetic(spec):
        raise ModelError(f"bad synthetic spec {spec!r}: expected one of "
                         f"{', '.join(f'{k}:n=N' for k in CONTACT_MECHANISMS)}")
    mech, p = _params(spec)
    return (swimmer if mech == "swimmer" else boxes)(p["n"])
