"""MJCF (MuJoCo's XML) loading through MuJoCo itself: the file is compiled by the ``mujoco``
package and the Robot is read off the compiled ``MjModel`` (body tree, joints, inertias,
armature, sites), so defaults, ``inertiafromgeom``, ``<include>``s and the compiler's other
rules are MuJoCo's and never re-implemented here.

q is MuJoCo's ``qpos`` and v its ``qvel`` exactly: every joint gets MuJoCo's conventions
(quaternions w, x, y, z; a free joint's linear velocity in the world, ``Joint.velocity =
"mujoco"``), and the bodies come out in MuJoCo's body order, so q and v are laid out as
``jnt_qposadr``/``jnt_dofadr`` say (checked).

The mapping onto the Robot (model/robot.py: a body frame is its joint's frame):

- A MuJoCo body with joints j₁ … jₙ becomes n bodies, one per joint, each with its frame at
  the joint's anchor (``jnt_pos``) in the orientation the previous joints leave (MuJoCo applies
  a body's joints in order, each about its anchor and axis in the frame the previous ones
  leave); the first n − 1 are massless (named ``BODY__JOINT``), the last carries the body's
  name, inertia and sites.  The body's name as a frame (``BODY:3d``) is MuJoCo's body frame.
  A free joint (its body's only joint, a child of the world) is the body's pose itself.
- A body without joints is welded to its parent: its inertia and sites join the moving body
  it hangs on (MuJoCo's ``body_weldid``); bodies welded to the world do not move and are left
  out (their sites too).
- Inertia: ``body_mass``, the com ``body_ipos`` and the principal moments ``body_inertia``
  in the inertial frame ``body_iquat``, as compiled (from geoms where MJCF says so).
- Sites are named frames (``FL_foot:3d`` with ``FL_foot`` a site); welded bodies are named
  frames too.  Armature is ``dof_armature``; gravity ``opt.gravity`` (zero where the model
  disables gravity).
- Not read, because they do not enter the mass matrix or the unconstrained dynamics the
  algorithms compute: damping, springs, friction loss, limits, actuators, tendons, contacts
  and geoms' collision data.
- MJCF equality constraints ``connect`` and ``weld`` become the scenario ``equality``
  (``equality_constraints``).

A hinge or slide joint's ``ref`` (MuJoCo measures its qpos from it: hopper's ``rootz``) is a
fixed motion in the tree transform.  A model whose mesh files are missing is compiled again
without its meshes (the geoms that use them made massless and contact-free, each mesh a
placeholder: the inertias of deleting them, in one pass); what was dropped is said on stderr,
since MuJoCo then computes those bodies' inertias without them.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from ..errors import ModelError
from .robot import Body, Frame, Joint, Robot, check_numbers, cross_matrix, quaternion_matrix
from .sdf import _Pose
from .urdf import _MergedInertia

MUJOCO = dict(quaternion="wxyz", velocity="mujoco")
_KINDS = {0: "free", 1: "ball", 2: "prismatic", 3: "revolute"}     # mjtJoint: FREE, BALL, SLIDE, HINGE


def mujoco_module():
    """The ``mujoco`` package, or a ModelError saying how to get it."""
    try:
        import mujoco
    except ImportError:
        raise ModelError("MJCF models need the 'mujoco' package: pip install 'casadi_delassus[mjcf]'") from None
    return mujoco


def _one_line(exc):
    """MuJoCo's (multi-line) error message on one line."""
    return "; ".join(t.strip() for t in str(exc).splitlines() if t.strip()) or type(exc).__name__


def compile_mjcf(path=None, text=None):
    """The compiled MjModel of an MJCF file (or of its ``text``); a model whose meshes cannot be
    read is compiled again without them (said on stderr).  A ModelError when MuJoCo refuses it."""
    mujoco = mujoco_module()
    label = path if text is None else "the MJCF text"
    try:
        return mujoco.MjModel.from_xml_path(str(path)) if text is None else mujoco.MjModel.from_xml_string(text)
    except Exception as exc:     # MuJoCo raises ValueError for every compile error
        first = f"MuJoCo cannot load {label}: {_one_line(exc)}"
    try:
        spec = mujoco.MjSpec.from_file(str(path)) if text is None else mujoco.MjSpec.from_string(text)
    except Exception:
        raise ModelError(first) from None
    if not spec.meshes:
        raise ModelError(first) from None
    meshes, geoms = _without_meshes(spec, mujoco)
    try:
        model = spec.compile()
    except Exception as exc:
        raise ModelError(f"{first} (and without its meshes: {_one_line(exc)})") from None
    print(f"{first}; loaded without its {len(meshes)} meshes ({', '.join(meshes[:6])}"
          f"{' ...' if len(meshes) > 6 else ''}) and the {len(geoms)} geoms using them: the inertias of bodies "
          f"that took them from those geoms differ from the full model's", file=sys.stderr)
    return model


# a tetrahedron of 1 mm: what a mesh is read as once its file is known to be missing (no geom
# uses it any more, but MuJoCo compiles every mesh asset)
_PLACEHOLDER_VERTICES = [0, 0, 0, 1e-3, 0, 0, 0, 1e-3, 0, 0, 0, 1e-3]


def _without_meshes(spec, mujoco):
    """(mesh names, geoms changed): every geom that uses a mesh made a massless sphere without
    contacts and every mesh a placeholder, in place.  The same inertias as deleting them, in
    one pass: MjSpec.delete walks the model each time, quadratic in the number of meshes."""
    geoms = [g for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH or g.meshname]
    for g in geoms:
        g.type, g.meshname, g.size = mujoco.mjtGeom.mjGEOM_SPHERE, "", [1e-3, 0, 0]
        g.mass = g.density = 0
        g.contype = g.conaffinity = 0
    meshes = list(spec.meshes)
    for m in meshes:
        m.file, m.uservert = "", _PLACEHOLDER_VERTICES
    return [m.name for m in meshes], geoms


def _quat(q):
    w, x, y, z = (float(t) for t in q)
    return np.array(quaternion_matrix(x, y, z, w))


def _name(model, kind, i, fallback):
    mujoco = mujoco_module()
    return mujoco.mj_id2name(model, kind, i) or fallback


def body_name(model, b):
    """MuJoCo body ``b``'s name; an unnamed body is ``body<id>`` (ant's feet: body4, ...)."""
    return _name(model, mujoco_module().mjtObj.mjOBJ_BODY, b, f"body{b}")


# a site named like a body (or like an earlier frame) is the frame <name>_site (_sites)
SITE_SUFFIX = "_site"


def site_id(model, name):
    """The id of the site our frame ``name`` is (``_sites``' naming undone), or -1."""
    mujoco = mujoco_module()
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    while site < 0 and name.endswith(SITE_SUFFIX):
        name = name[:-len(SITE_SUFFIX)]
        site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name)
    return site


def body_id(model, name):
    """The id of the body ``body_name`` calls ``name``, or -1."""
    mujoco = mujoco_module()
    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    m = re.fullmatch(r"body(\d+)", name)
    if b < 0 and m and int(m[1]) < model.nbody and body_name(model, int(m[1])) == name:
        return int(m[1])
    return b


def load_mjcf(path, name=None) -> Robot:
    """A Robot in MuJoCo's conventions from an MJCF file (see the module docstring), named
    ``name``, default its <mujoco model> (Menagerie-derived packages name the file robot.xml),
    else the file's stem."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    model = compile_mjcf(path)
    try:
        robot = robot_from_mjmodel(model, name or _model_name(model) or path.stem, source=str(path))
    except ModelError as exc:
        raise ModelError(f"MJCF model {path}: {exc}") from None
    return robot


def _model_name(model):
    """The compiled model's <mujoco model> ("" when the file gives none: MuJoCo then says "MuJoCo Model")."""
    name = model.names.split(b"\0", 1)[0].decode()
    return "" if name == "MuJoCo Model" else name


def load_mjcf_string(text, name=None) -> Robot:
    """A Robot from an MJCF document given as text (named by its <mujoco model>, else "mjcf")."""
    model = compile_mjcf(text=text)
    try:
        return robot_from_mjmodel(model, name or _model_name(model) or "mjcf")
    except ModelError as exc:
        raise ModelError(f"MJCF model given as text: {exc}") from None


def robot_from_mjmodel(model, name, source=None) -> Robot:
    """The Robot of a compiled MjModel (see the module docstring)."""
    mujoco = mujoco_module()
    obj = mujoco.mjtObj
    body_names = [body_name(model, b) for b in range(model.nbody)]
    check_numbers(model.body_pos, "body positions")
    check_numbers(model.body_quat, "body orientations")
    bodies, merged, frames = [], [], []
    # MuJoCo body -> (our body it moves with (-1: the world), its frame in that body's coordinates)
    placement = {0: (-1, _Pose())}
    used = set(body_names)
    for b in range(1, model.nbody):
        parent, at = placement[int(model.body_parentid[b])]
        joints = range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b])
        pose = at * _Pose(_quat(model.body_quat[b]), np.array(model.body_pos[b], float))
        anchor = np.zeros(3)        # the current joint's anchor in the MuJoCo body's coordinates
        for k, j in enumerate(joints):
            kind = _KINDS.get(int(model.jnt_type[j]))
            jname = _name(model, obj.mjOBJ_JOINT, j, f"{body_names[b]}_joint{k}")
            if kind == "free":
                if model.body_parentid[b] != 0 or len(joints) != 1:
                    raise ModelError(f"free joint {jname!r}: only a free joint alone in a child of the world "
                                     f"is supported")
                pose, new_anchor = _Pose(), np.zeros(3)
            else:
                new_anchor = check_numbers(model.jnt_pos[j], f"joint {jname!r}: pos").copy()
                # a joint frame at the anchor: after the previous joint, the previous anchor is the origin
                pose = pose * _Pose(p=new_anchor - anchor) * _reference_offset(model, j, kind)
            last = k == len(joints) - 1
            bname = body_names[b] if last else f"{body_names[b]}__{jname}"
            if not last and bname in used:
                raise ModelError(f"body {body_names[b]!r}: the name {bname!r} for the frame of its joint "
                                 f"{jname!r} is taken")
            used.add(bname)
            axis = None if kind in ("free", "ball") else np.array(model.jnt_axis[j], float)
            bodies.append(Body(bname, parent, Joint(jname, kind, axis, **MUJOCO), pose.R.T, pose.p,
                               0.0, np.zeros(3), np.eye(3)))
            merged.append(_MergedInertia())
            parent, pose, anchor = len(bodies) - 1, _Pose(), new_anchor
        # the MuJoCo body's own frame in the coordinates of the body it moves with
        here = _Pose(p=-anchor) if len(joints) else pose
        placement[b] = (parent, here)
        if parent < 0:
            continue        # welded to the world: it never moves
        # the body's name means MuJoCo's body frame (not the frame at its last joint's anchor)
        frames.append(Frame(body_names[b], parent, here.R, here.p))
        inertial = here * _Pose(_quat(model.body_iquat[b]), np.array(model.body_ipos[b], float))
        I = inertial.R @ np.diag(check_numbers(model.body_inertia[b], f"body {body_names[b]!r}: inertia")) @ inertial.R.T
        merged[parent].add(float(check_numbers(model.body_mass[b], f"body {body_names[b]!r}: mass")), inertial.p, I)
    for body, m in zip(bodies, merged):
        body.mass, body.com, body.inertia = m.com_form()
    frames += _sites(model, placement, used)
    _check_layout(model, bodies)
    gravity = np.zeros(3) if model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY else model.opt.gravity
    robot = Robot(name, bodies, frames, source=source, gravity=np.array(gravity, float),
                  armature=np.array(model.dof_armature, float), convention="mujoco")
    robot.model_format = "mjcf"
    robot.equality = equality_constraints(model, {b: placement[b][0] >= 0 for b in placement})
    return robot


_SPEC_CHARACTERS = re.compile(r"[|:@;,\s]")


def _vector(x):
    return ",".join(repr(float(t)) for t in x)


def equality_constraints(model, moves):
    """MJCF's active ``connect`` and ``weld`` equality constraints as constraint specs (the
    robot's ``equality`` scenario): a connect between bodies is ``A|B:3d@a;b`` (its anchors, as
    MuJoCo compiled them, in the bodies' frames), between sites ``A|B:3d``, a weld ``A|B:6d``;
    one side fixed to the world (the world body, or a body welded to it) leaves ``A:3d@a`` /
    ``A:6d`` on the other.  Rows are along A's frame axes (MuJoCo's connect rows are along the
    world's: the same constraint, rotated).  Other kinds, inactive ones and names that a spec
    cannot carry are left out, said on stderr."""
    mujoco = mujoco_module()
    obj, eq = mujoco.mjtObj, mujoco.mjtEq
    specs, skipped = [], []
    for e in range(model.neq):
        label = mujoco.mj_id2name(model, obj.mjOBJ_EQUALITY, e) or f"equality {e}"
        kind, data = int(model.eq_type[e]), model.eq_data[e]
        if kind not in (eq.mjEQ_CONNECT, eq.mjEQ_WELD) or not model.eq_active0[e]:
            skipped.append(f"{label} ({'inactive' if kind in (eq.mjEQ_CONNECT, eq.mjEQ_WELD) else eq(kind).name[5:].lower()})")
            continue
        sites = int(model.eq_objtype[e]) == obj.mjOBJ_SITE
        ends = []
        for k, i in enumerate((int(model.eq_obj1id[e]), int(model.eq_obj2id[e]))):
            body = int(model.site_bodyid[i]) if sites else i
            name = mujoco.mj_id2name(model, obj.mjOBJ_SITE, i) if sites else body_name(model, i)
            # a connect's anchors: data[0:3] on body 1, data[3:6] on body 2; a site is its own point
            point = None if sites or kind == eq.mjEQ_WELD else data[3 * k:3 * k + 3]
            if moves.get(body, False):
                ends.append((name, point))
        if not ends or any(n is None or _SPEC_CHARACTERS.search(n) for n, _ in ends):
            skipped.append(f"{label} ({'fixed to the world at both ends' if not ends else 'a name a spec cannot carry'})")
            continue
        names = "|".join(n for n, _ in ends)
        points = ";".join(_vector(p) for _, p in ends if p is not None)
        specs.append(f"{names}:{'6d' if kind == eq.mjEQ_WELD else '3d'}" + (f"@{points}" if points else ""))
    if skipped:
        print(f"{model.neq - len(specs)} of {model.neq} MJCF equality constraints not in the 'equality' scenario: "
              f"{', '.join(skipped)}", file=sys.stderr)
    return specs


def _reference_offset(model, j, kind):
    """MuJoCo moves a hinge or slide joint by qpos − ref: the motion by −ref about or along the
    axis, fixed, joins the tree transform (a rotation about the axis keeps the axis)."""
    if kind not in ("revolute", "prismatic"):
        return _Pose()
    ref = float(check_numbers(model.qpos0[model.jnt_qposadr[j]], "ref"))
    axis = np.array(model.jnt_axis[j], float)
    if kind == "prismatic":
        return _Pose(p=-ref * axis)
    A = cross_matrix(axis / np.linalg.norm(axis))
    return _Pose(np.eye(3) - np.sin(ref) * A + (1 - np.cos(ref)) * A @ A)


def _sites(model, placement, used):
    """Named sites on moving bodies as Frames.  MuJoCo keeps body and site names apart, and
    models often name a site like its body (dm_control's ``torso``): such a site is the frame
    ``<name>_site`` (``_site`` again while that is taken), so that ``<name>`` keeps meaning the body."""
    mujoco = mujoco_module()
    out = []
    for s in range(model.nsite):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, s)
        parent, at = placement[int(model.site_bodyid[s])]
        if not name or parent < 0:
            continue
        while name in used:
            name += SITE_SUFFIX
        used.add(name)
        pose = at * _Pose(_quat(model.site_quat[s]), np.array(model.site_pos[s], float))
        out.append(Frame(name, parent, pose.R, pose.p))
    return out


def _check_layout(model, bodies):
    """Our q and v slices are MuJoCo's qpos and qvel (bodies in MuJoCo's order, joints in body order)."""
    q = v = 0
    for j, body in enumerate(bodies):
        if (q, v) != (model.jnt_qposadr[j], model.jnt_dofadr[j]):
            raise ModelError(f"joint {body.joint.name!r}: its qpos/qvel address ({model.jnt_qposadr[j]}, "
                             f"{model.jnt_dofadr[j]}) differs from the tree order's ({q}, {v})")
        q, v = q + body.joint.nq, v + body.joint.nv
    if (q, v) != (model.nq, model.nv):
        raise ModelError(f"nq, nv = {q}, {v} read, MuJoCo has {model.nq}, {model.nv}")
