"""Named robots read from installed packages, with constraint scenarios kept in
``casadi_delassus/model/robots/<name>.json``, package data that the wheel carries (set
CASADI_DELASSUS_ROBOTS to use another folder).  Each file gives
the package that ships the model, the file inside it (URDF, or SDF for closed loops), whether
the base floats, optionally ``"armature"`` (rotor inertia: a number for every DoF of every joint
but a free base, or a list of nv numbers; ``Robot.armature``), and named scenarios: lists of
constraint specs (see constraints.py), where the item ``@loops`` stands for the loop-closing
constraints an SDF model defines (sdf.py)."""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
from functools import lru_cache
from pathlib import Path

from ..errors import ModelError, unknown_name


def robots_dir():
    """The folder of the registry's files: $CASADI_DELASSUS_ROBOTS, else the package's own
    (through importlib.resources, so an installed wheel finds it as a source checkout does)."""
    env = os.environ.get("CASADI_DELASSUS_ROBOTS")
    return Path(env) if env else importlib.resources.files(__package__) / "robots"


@lru_cache(maxsize=None)
def registry():
    """{robot name: its registry entry}, in name order; empty where the folder is missing."""
    d = robots_dir()
    if not d.is_dir():
        return {}
    out = {}
    for p in sorted((p for p in d.iterdir() if p.name.endswith(".json")), key=lambda p: p.name):
        try:
            entry = json.loads(p.read_text())
        except ValueError as exc:
            raise ModelError(f"malformed robot registry file {p}: {exc}") from None
        out[p.name[:-len(".json")]] = entry
    return out


def names():
    return list(registry())


def model_path(name):
    entry = registry()[name]
    try:
        dist = importlib.metadata.distribution(entry["package"])
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"robot {name!r} needs the package {entry['package']!r}: "
                         f"pip install {entry['package']} (or run `make setup`)") from None
    path = Path(dist.locate_file(entry["file"]))
    if not path.is_file():
        raise ModelError(f"robot {name!r}: {entry['file']} not found in package {entry['package']!r}")
    return path


def is_available(name):
    try:
        model_path(name)
        return True
    except ModelError:
        return False


LOOPS = "@loops"


def floats(name):
    """Whether the registry robot ``name`` is on a free base by default (its entry's floating_base)."""
    return bool(registry()[name].get("floating_base", True))


def load_registered(name, floating_base=None):
    """The registry robot ``name``; ``floating_base`` overrides its entry's base (URDF models)."""
    from .sdf import load_sdf
    from .urdf import load_urdf
    if name not in registry():
        raise ModelError(unknown_name("robot", name, registry()))
    entry = registry()[name]
    path = model_path(name)
    if path.suffix.lower() == ".sdf":
        robot = load_sdf(path, name=name)
    else:
        robot = load_urdf(path, floating_base=floats(name) if floating_base is None else floating_base, name=name)
    if "armature" in entry:
        robot.armature = entry["armature"]          # Robot.armature: a number (every joint but free ones) or nv
    robot.scenarios = {sc: expand_loops(robot, specs) for sc, specs in entry.get("scenarios", {}).items()}
    robot.description = entry.get("description", "")
    return robot


def expand_loops(robot, specs):
    """``specs`` with the item ``@loops`` replaced by the model's loop-closing constraints."""
    out = []
    for s in specs:
        if s == LOOPS and not getattr(robot, "loops", None):
            raise ModelError(f"robot {robot.name!r}: scenario item {LOOPS!r} but its model closes no loops")
        out += robot.loops if s == LOOPS else [s]
    return out
