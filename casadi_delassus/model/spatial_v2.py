"""Loader for Featherstone's spatial_v2 model structure, stored as JSON.

The JSON object holds the fields of a spatial_v2 ``model`` (1-based, MATLAB order):

``NB``            number of bodies (integer >= 1)
``parent``        NB integers; ``parent[i-1]`` is the parent of body i, 0 = world
``jtype``         NB strings: 'Rx', 'Ry', 'Rz', 'R' (= about z) for revolute joints,
                  'Px', 'Py', 'Pz', 'P' (= along z) for prismatic joints
``Xtree``         NB 6x6 Plücker transforms, parent coordinates -> joint frame,
                  Featherstone [angular; linear] order: X = [[E, 0], [-E r~, E]]
``I``             NB 6x6 spatial inertias in body coordinates, [angular; linear] order:
                  [[Ic + m c~ c~ᵀ, m c~], [m c~ᵀ, m 1]]
``bodyNames``     optional, NB unique names (default 'body1', 'body2', ...)
``floating_base`` optional boolean: body 1 hangs on a 6-DoF free joint and its jtype is
                  ignored.  Without the key, an empty (or null) jtype for body 1 means the
                  same (the papers' Talos file marks its floating base that way).
``gravity``       optional 3-vector (default [0, 0, -9.81])

Other keys (``source``, ``note``, ...) are ignored.  Joints are named ``<bodyName>_joint``;
the free joint is ``root_joint``, as Pinocchio names a FreeFlyer root.  Bodies keep the
file's order when every parent precedes its child; otherwise they are reordered
depth-first from the roots (children in file order).

Every malformed input raises :class:`~casadi_delassus.errors.ModelError` with a one-line
message naming the problem.  :func:`to_spatial_v2` writes a Robot back in the same form.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import ModelError
from .robot import Body, Joint, Robot, check_numbers, cross_matrix

_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
JTYPES = {
    "Rx": ("revolute", "x"), "Ry": ("revolute", "y"), "Rz": ("revolute", "z"), "R": ("revolute", "z"),
    "Px": ("prismatic", "x"), "Py": ("prismatic", "y"), "Pz": ("prismatic", "z"), "P": ("prismatic", "z"),
}
# Relative tolerance on the structure of Xtree and I (values come from MATLAB doubles).
_TOL = 1e-9


def load_spatial_v2_json(path, name=None) -> Robot:
    """Read a spatial_v2 model from a JSON file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read spatial_v2 model {path}: {type(exc).__name__}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"invalid JSON in spatial_v2 model {path}: {exc.msg} "
                         f"(line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise ModelError(f"invalid JSON in spatial_v2 model {path}: {exc}") from None
    return robot_from_spatial_v2(data, name=name or path.stem, source=str(path))


def robot_from_spatial_v2(data, name="spatial_v2_model", source=None) -> Robot:
    """Build a Robot from an already-decoded spatial_v2 JSON object (a dict)."""
    where = f"spatial_v2 model {source}" if source else "spatial_v2 model"
    try:
        return _build(data, name, source, where)
    except ModelError:
        raise
    except Exception as exc:  # a safety net: no traceback of ours may reach the user
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise ModelError(f"malformed {where}: {type(exc).__name__}: {detail}") from None


# -- field readers -----------------------------------------------------------------------

def _integer(value, what, where):
    if isinstance(value, bool):
        raise ModelError(f"malformed {where}: {what} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    raise ModelError(f"malformed {where}: {what} must be an integer, got {value!r}")


def _list(data, key, nb, where, matrices=False):
    if key not in data:
        raise ModelError(f"malformed {where}: missing key {key!r}")
    value = data[key]
    if nb == 1:              # MATLAB exports a 1-element cell as the element itself
        if matrices and isinstance(value, list) and len(value) == 6:
            value = [value]
        elif not matrices and not isinstance(value, list):
            value = [value]
    if not isinstance(value, list):
        raise ModelError(f"malformed {where}: {key!r} must be a list of {nb} entries, "
                         f"got {type(value).__name__}")
    if len(value) != nb:
        raise ModelError(f"malformed {where}: {key!r} has {len(value)} entries, NB = {nb}")
    return value


def _matrix6(value, key, body, where):
    try:
        a = np.array(value, dtype=float)
    except (TypeError, ValueError):
        a = None
    if a is None or a.shape != (6, 6):
        shape = "a ragged or non-numeric array" if a is None else f"shape {a.shape}"
        raise ModelError(f"malformed {where}: {key} of body {body!r} must be a 6x6 numeric "
                         f"matrix, got {shape}")
    return check_numbers(a, f"{key} of body {body!r}", f"malformed {where}: ")


def _skew_vector(S):
    return np.array([S[2, 1], S[0, 2], S[1, 0]])


def split_plucker(X, body="?", where="spatial_v2 model"):
    """(E, r) of a Plücker transform X = [[E, 0], [-E r~, E]], checking its structure."""
    E = X[:3, :3]
    scale = max(1.0, float(np.abs(X).max()))
    tol = _TOL * scale
    problem = None
    if np.abs(X[:3, 3:]).max() > tol:
        problem = "its upper-right 3x3 block is not zero"
    elif np.abs(X[3:, 3:] - E).max() > tol:
        problem = "its diagonal 3x3 blocks differ"
    elif np.abs(E @ E.T - np.eye(3)).max() > 1e-8 or np.linalg.det(E) < 0:
        problem = "its rotation block is not a proper rotation matrix"
    if problem is None:
        rx = -E.T @ X[3:, :3]
        if np.abs(rx + rx.T).max() > tol:
            problem = "its lower-left block is not -E r~ (r~ not skew-symmetric)"
    if problem:
        raise ModelError(f"malformed {where}: Xtree of body {body!r} is not a Plücker "
                         f"transform: {problem}")
    return E.copy(), _skew_vector(0.5 * (rx - rx.T))


def split_spatial_inertia(I, body="?", where="spatial_v2 model"):
    """(mass, com, inertia about the com) of a 6x6 rigid-body spatial inertia.  A massless body
    (a virtual link: mass 0, no first moment) and a singular rotational inertia (a point mass)
    are fine here; the Robot refuses them only where the mass matrix is singular."""
    scale = max(1.0, float(np.abs(I).max()))
    tol = _TOL * scale
    m = float(np.trace(I[3:, 3:]) / 3.0)
    massless = abs(m) <= tol
    problem = None
    if np.abs(I - I.T).max() > tol:
        problem = "it is not symmetric"
    elif m < 0 and not massless:
        problem = f"its mass {m:g} is negative"
    elif np.abs(I[3:, 3:] - m * np.eye(3)).max() > tol:
        problem = "its lower-right block is not mass * identity"
    elif np.abs(I[:3, 3:] + I[:3, 3:].T).max() > tol:
        problem = "its off-diagonal block is not m c~ (not skew-symmetric)"
    elif massless and np.abs(I[:3, 3:]).max() > tol:
        problem = "it has a first moment m c~ but no mass"
    if problem is None:
        m = 0.0 if massless else m
        com = np.zeros(3) if massless else _skew_vector(0.5 * (I[:3, 3:] - I[:3, 3:].T)) / m
        c = cross_matrix(com)
        Ic = I[:3, :3] + m * c @ c
        Ic = 0.5 * (Ic + Ic.T)
        eig = np.linalg.eigvalsh(Ic)
        if eig.min() < -tol:
            problem = (f"its rotational inertia about the centre of mass is not positive "
                       f"semi-definite (principal moments {np.round(eig, 12).tolist()})")
    if problem:
        raise ModelError(f"malformed {where}: I of body {body!r} is not a rigid-body spatial "
                         f"inertia: {problem}")
    return m, com, Ic


def _check_parents(parents, names, where):
    """Parents (1-based, 0 = world) must be in range and acyclic."""
    nb = len(parents)
    for i, p in enumerate(parents):
        if not 0 <= p <= nb:
            raise ModelError(f"malformed {where}: parent of body {names[i]!r} is {p}, "
                             f"out of range 0..{nb}")
        if p == i + 1:
            raise ModelError(f"malformed {where}: body {names[i]!r} is its own parent")
    state = [0] * nb            # 0 unknown, 1 on the current path, 2 reaches the world
    for start in range(nb):
        path, i = [], start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            path.append(i)
            i = parents[i] - 1
        if i >= 0 and state[i] == 1:
            cycle = path[path.index(i):]
            raise ModelError(f"malformed {where}: cyclic parent structure through bodies "
                             f"{', '.join(repr(names[k]) for k in cycle)}")
        for k in path:
            state[k] = 2


def _order(parents):
    """File order if topological, else depth-first from the roots (children in file order)."""
    nb = len(parents)
    if all(p - 1 < i for i, p in enumerate(parents)):
        return list(range(nb))
    children = [[] for _ in range(nb + 1)]
    for i, p in enumerate(parents):
        children[p].append(i)
    order, stack = [], list(reversed(children[0]))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children[i + 1]))
    return order


# -- the model ---------------------------------------------------------------------------

def _build(data, name, source, where):
    if not isinstance(data, dict):
        raise ModelError(f"malformed {where}: expected a JSON object with keys NB, parent, "
                         f"jtype, Xtree, I, got {type(data).__name__}")
    if "NB" not in data:
        raise ModelError(f"malformed {where}: missing key 'NB'")
    nb = _integer(data["NB"], "NB", where)
    if nb < 1:
        raise ModelError(f"malformed {where}: NB = {nb}, expected at least 1 body")

    # the lists first: NB alone must never size an allocation (a 90-byte file with NB = 1e12)
    raw_parents = _list(data, "parent", nb, where)
    jtypes = _list(data, "jtype", nb, where)
    xtrees = _list(data, "Xtree", nb, where, matrices=True)
    inertias = _list(data, "I", nb, where, matrices=True)
    if data.get("bodyNames") is None:
        names = [f"body{i + 1}" for i in range(nb)]
    else:
        names = _list(data, "bodyNames", nb, where)
        for i, n in enumerate(names):
            if not isinstance(n, str) or not n.strip():
                raise ModelError(f"malformed {where}: bodyNames entry {i + 1} is {n!r}, "
                                 f"expected a non-empty string")
        seen = set()
        for n in names:
            if n in seen:
                raise ModelError(f"malformed {where}: duplicate body name {n!r} in bodyNames")
            seen.add(n)

    parents = [_integer(p, f"parent of body {names[i]!r}", where) for i, p in enumerate(raw_parents)]

    floating = data.get("floating_base")
    if floating is not None and not isinstance(floating, bool):
        raise ModelError(f"malformed {where}: 'floating_base' must be true or false, "
                         f"got {floating!r}")
    if floating is None:
        floating = jtypes[0] is None or (isinstance(jtypes[0], str) and not jtypes[0].strip())

    _check_parents(parents, names, where)
    if floating and parents[0] != 0:
        raise ModelError(f"malformed {where}: floating base body {names[0]!r} must have "
                         f"parent 0 (the world), got {parents[0]}")

    joints = []
    for i, jt in enumerate(jtypes):
        if i == 0 and floating:
            joints.append(Joint("root_joint", "free"))
            continue
        if not isinstance(jt, str) or jt.strip() not in JTYPES:
            hint = " (an empty jtype marks a floating base, allowed for body 1 only)" \
                if jt is None or (isinstance(jt, str) and not jt.strip()) else ""
            raise ModelError(f"malformed {where}: bad jtype {jt!r} for body {names[i]!r}; "
                             f"expected one of {', '.join(JTYPES)}{hint}")
        kind, ax = JTYPES[jt.strip()]
        joints.append(Joint(f"{names[i]}_joint", kind, np.array(_AXES[ax])))

    geometry = [split_plucker(_matrix6(x, "Xtree", names[i], where), names[i], where)
                for i, x in enumerate(xtrees)]
    mass_props = [split_spatial_inertia(_matrix6(a, "I", names[i], where), names[i], where)
                  for i, a in enumerate(inertias)]

    gravity = data.get("gravity", (0.0, 0.0, -9.81))
    try:
        gravity = np.array(gravity, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        gravity = np.zeros(0)
    if gravity.shape != (3,):
        raise ModelError(f"malformed {where}: 'gravity' must be a 3-vector")
    check_numbers(gravity, "'gravity'", f"malformed {where}: ")

    order = _order(parents)
    new_index = {old: new for new, old in enumerate(order)}
    bodies = []
    for old in order:
        E, r = geometry[old]
        m, com, Ic = mass_props[old]
        parent = new_index[parents[old] - 1] if parents[old] > 0 else -1
        bodies.append(Body(names[old], parent, joints[old], E, r, m, com, Ic))
    return Robot(name, bodies, source=source, gravity=gravity)


# -- writing back ------------------------------------------------------------------------

def plucker(E, r):
    """6x6 Plücker transform [[E, 0], [-E r~, E]] ([angular; linear] order)."""
    X = np.zeros((6, 6))
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = -E @ cross_matrix(r)
    return X


def _jtype(joint):
    if joint.kind == "free":
        return ""
    if joint.kind == "ball":
        raise ModelError(f"joint {joint.name!r}: spatial_v2 jtype cannot express a ball joint")
    for ax, v in _AXES.items():
        if np.allclose(joint.axis, v, atol=1e-12):
            return ("R" if joint.kind in ("revolute", "continuous") else "P") + ax
    raise ModelError(f"joint {joint.name!r}: axis {np.round(joint.axis, 6).tolist()} is not "
                     f"a coordinate axis; spatial_v2 jtype cannot express it")


def to_spatial_v2(robot) -> dict:
    """The robot as a spatial_v2 JSON object (1-based parents, Plücker Xtree and I)."""
    return {
        "NB": robot.n_bodies,
        "parent": [b.parent + 1 for b in robot.bodies],
        "jtype": [_jtype(b.joint) for b in robot.bodies],
        "Xtree": [plucker(b.rotation, b.translation).tolist() for b in robot.bodies],
        "I": [b.spatial_inertia().tolist() for b in robot.bodies],
        "bodyNames": [b.name for b in robot.bodies],
        "floating_base": robot.floating_base,
        "gravity": robot.gravity.tolist(),
    }
