"""Contact candidates: the one spec form ``LINK[@x,y,z][/r]`` that ``step``, ``simulate``,
``cd.contact_step`` and ``cd.simulate`` take (issue 34, point 3).

``LINK`` is a body or frame of the model (``links ROBOT`` lists them), ``@x,y,z`` a point in
its frame (default its origin) and ``/r`` makes the candidate a sphere of radius r centred
there.  Contact rows are along the world axes [t₁, t₂, n] for the ground plane (Pinocchio's
LOCAL_WORLD_ALIGNED, constraints.py's ``LINK:3d-world``, which stays accepted as the same
point).  A registry scenario whose constraints are points names a set of candidates."""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..constraints import _point, parse_constraint
from ..errors import ConstraintError, InputError

FORM = "LINK[@x,y,z][/r]"
HELP = ("contact candidate LINK[@x,y,z][/r]: a point on body or frame LINK (offset x,y,z in its frame, default its "
        "origin), a sphere of radius r centred there with /r (repeatable; `links ROBOT` lists the names)")
_ALIAS = re.compile(r":3d-world$", re.IGNORECASE)      # the constraint spelling of the same point
_SCENARIO_POINT = re.compile(r"^(?P<link>[^:@|]+):3d(?:-world)?(?:@(?P<offset>[^@]+))?$", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    """A contact candidate: a point ``point`` (body coordinates) on ``link``'s body, with
    ``radius`` > 0 for a sphere centred there.  ``spec`` is how the user wrote it."""
    spec: str
    link: str
    body: int
    point: np.ndarray
    radius: float = 0.0


def _parts(text):
    """(link, offset text or None, radius) of a candidate spec, or a ConstraintError in the one form."""
    if not isinstance(text, str):
        raise ConstraintError(f"bad contact candidate {text!r}: expected a string {FORM}, got {type(text).__name__}")
    where, slash, radius = text.strip().rpartition("/")
    if not slash or "@" in radius or ":" in radius:       # that '/' is part of a name (link names may hold one)
        where, slash, radius = text.strip(), "", ""
    link, at, offset = where.partition("@")
    link = _ALIAS.sub("", link.strip())
    if ":" in link:
        raise ConstraintError(f"bad contact candidate {text!r}: not a world-aligned point contact {FORM} (a "
                              f"constraint of kind {link.partition(':')[2]!r})")
    if not link or "|" in link:
        raise ConstraintError(f"bad contact candidate {text!r}: expected {FORM} (a point on LINK, offset in its "
                              f"frame, a sphere of radius r with /r)")
    try:
        r = float(radius) if slash else 0.0
    except ValueError:
        r = -1.0
    if not (np.isfinite(r) and r >= 0):
        raise InputError(f"bad contact candidate {text!r}: the radius after '/' must be a number ≥ 0")
    if at:
        with _reworded(text, text):
            _point(text, offset.strip(), "the offset after '@' must be three numbers x,y,z")
    return link, offset.strip() if at else None, r


def point_spec(text):
    """The world-aligned point constraint ``LINK:3d-world[@x,y,z]`` of a candidate without a radius (the contact
    step's rows); a sphere is refused: its friction point moves on the body (``simulate`` places it at q0)."""
    link, offset, r = _parts(text)
    if r:
        raise ConstraintError(f"contact {text!r} is a sphere: the contact step takes points {FORM.replace('[/r]', '')}; "
                              f"`simulate` and cd.simulate take spheres (their friction point at the lowest point at q0)")
    return _spec(link, offset)


def _spec(link, offset):
    return f"{link}:3d-world" + (f"@{offset}" if offset else "")


def parse_candidate(robot, text):
    """``LINK[@x,y,z][/radius]`` (offset in the link's frame) as a Candidate of ``robot``."""
    link, offset, r = _parts(text)
    spec = _spec(link, offset)
    with _reworded(spec, text):
        c = parse_constraint(robot, spec)
    return Candidate(text.strip(), c.link, c.body, np.asarray(c.point, dtype=float), r)


@contextmanager
def _reworded(spec, text):
    """A constraints.py error about ``spec`` said of the candidate ``text`` the user wrote, in the one form."""
    try:
        yield
    except ConstraintError as exc:
        prefix = f"bad constraint spec {spec!r}: "
        raise ConstraintError(f"bad contact candidate {text.strip()!r}: " + str(exc).removeprefix(prefix)) from None


def point_specs(robot, contacts):
    """The contact step's constraint specs of ``contacts`` (candidate_list): points only, each checked on ``robot``."""
    texts = candidate_list(robot, contacts)
    specs = [point_spec(t) for t in texts]
    for t in texts:
        parse_candidate(robot, t)
    return specs


def scenario_candidates(robot, name):
    """The candidates a registry scenario names: its point constraints LINK:3d[@x,y,z] as LINK[@x,y,z]."""
    scenarios = getattr(robot, "scenarios", {})
    points = [s for s, specs in scenarios.items() if all(_SCENARIO_POINT.match(x) for x in specs)]
    known = f"scenarios of points: {', '.join(points)}" if points else "it has no scenario of points: give -c " + FORM
    if name not in scenarios:
        raise InputError(f"unknown scenario {name!r} of robot {robot.name!r} ({known})")
    out = []
    for spec in scenarios[name]:
        m = _SCENARIO_POINT.match(spec)
        if not m:
            raise InputError(f"scenario {name!r} of {robot.name} has {spec!r}, not a point: contact candidates are "
                             f"points ({known})")
        out.append(m["link"] + (f"@{m['offset']}" if m["offset"] else ""))
    return out


def candidate_list(robot, contacts):
    """The candidate specs of ``contacts``: one spec, a list of them, or a scenario name of ``robot``."""
    if isinstance(contacts, str) and contacts in getattr(robot, "scenarios", {}):
        return scenario_candidates(robot, contacts)
    if isinstance(contacts, str):
        return [contacts]
    try:
        return list(contacts)
    except TypeError:
        raise InputError(f"contacts must be a candidate {FORM}, a list of them or a scenario name, got "
                         f"{type(contacts).__name__}") from None
