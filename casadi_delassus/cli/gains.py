"""Per-joint PD gains of ``simulate`` (issue 34, point 5): ``--kp``/``--kd`` take a number (every
one-DoF joint) or NAME=VALUE, NAME an fnmatch pattern on joint names (``links ROBOT`` lists
them), repeatable, a later one overriding an earlier; ``--gains FILE.json`` holds
{"kp": number or {PATTERN: VALUE}, "kd": …}, applied before the options.  The result is one
value per one-DoF joint, in simulation/feedback.py's ``one_dof_joints`` order, for pd_controller."""
from __future__ import annotations

import fnmatch
import json
import math

import numpy as np

from ..simulation.feedback import one_dof_joints
from ..errors import InputError
from ..names import shown

KEYS = ("kp", "kd")


def joint_names(robot):
    """The one-DoF joints' names, in one_dof_joints order."""
    by_v = {b.v_index: b.joint.name for b in robot.bodies}
    return [by_v[int(i)] for i in one_dof_joints(robot)[1]]


def _value(what, text):
    """A finite gain, or an InputError naming ``what``."""
    try:
        x = float(text)
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or isinstance(text, bool):
        raise InputError(f"{what}: expected a finite number, got {shown(text)}")
    return x


def apply(gains, names, what, pattern, value):
    """Set ``gains`` (one per name) to ``value`` where ``pattern`` (None: every joint) matches a name."""
    x = _value(f"{what} {pattern}" if pattern is not None else what, value)
    hit = [i for i, n in enumerate(names) if pattern is None or fnmatch.fnmatchcase(n, pattern)]
    if not hit and pattern is not None:
        raise InputError(f"{what}: no one-DoF joint matches {pattern!r} (joints: {', '.join(names) or 'none'})")
    gains[hit] = x


def from_file(path):
    """{"kp": [(pattern or None, value)], "kd": …} of a gains JSON file."""
    try:
        data = json.loads(open(path, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--gains {path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or set(data) - set(KEYS):
        raise InputError(f"--gains {path}: expected an object with keys kp and/or kd, each a number or "
                         f"{{PATTERN: VALUE}}")
    out = {}
    for key, v in data.items():
        if isinstance(v, dict):
            out[key] = [(str(p), x) for p, x in v.items()]
        else:
            out[key] = [(None, v)]
    return out


def joint_gains(robot, kp=(), kd=(), path=None):
    """(kp, kd): one value per one-DoF joint of ``robot`` from a gains file and the options."""
    names = joint_names(robot)
    given = from_file(path) if path else {}
    out = []
    for key, texts in zip(KEYS, (kp, kd)):
        g = np.zeros(len(names))
        for pattern, value in given.get(key, []):
            apply(g, names, f"--gains {key}", pattern, value)
        for text in texts:
            pattern, sep, value = text.partition("=")
            if sep:
                apply(g, names, f"--{key}", pattern.strip(), value)
            else:
                apply(g, names, f"--{key}", None, text)
        out.append(g)
    return tuple(out)
