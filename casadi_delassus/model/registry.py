"""Named robots read from installed packages, with constraint scenarios kept in
``robots/<name>.json`` (set CASADI_DELASSUS_ROBOTS to use another folder).  Each file gives
the package that ships the model, the file inside it, whether the base floats, and named
scenarios: lists of constraint specs (see constraints.py)."""
from __future__ import annotations

import importlib.metadata
import json
import os
from functools import lru_cache
from pathlib import Path

from ..errors import ModelError, unknown_name


def robots_dir():
    env = os.environ.get("CASADI_DELASSUS_ROBOTS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "robots"


@lru_cache(maxsize=None)
def registry():
    d = robots_dir()
    if not d.is_dir():
        return {}
    out = {}
    for p in sorted(d.glob("*.json")):
        try:
            entry = json.loads(p.read_text())
        except ValueError as exc:
            raise ModelError(f"malformed robot registry file {p}: {exc}") from None
        out[p.stem] = entry
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


def load_registered(name):
    from .urdf import load_urdf
    if name not in registry():
        raise ModelError(unknown_name("robot", name, registry()))
    entry = registry()[name]
    robot = load_urdf(model_path(name), floating_base=entry.get("floating_base", True), name=name)
    robot.scenarios = dict(entry.get("scenarios", {}))
    robot.description = entry.get("description", "")
    return robot
