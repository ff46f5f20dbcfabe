"""What an MjModel uses, and what of it this package does not model: refused by name in one
ModelError line, never silently ignored (issue 32).

Supported (MuJoCo 4.0's computation chapter and engine sources, read to learn the method):
joints free, ball, hinge, slide; armature; dof damping and joint stiffness (linear
coefficients); friction loss; joint limits (hinge, slide, ball); equality connect, weld and
joint (body or site semantics); actuators with a joint transmission on a hinge or slide joint,
dynamics none, gain fixed or affine, bias none or affine, gear, ctrlrange and forcerange
clamping, joint-level actuator force ranges, actuator groups disabled by ``opt.disableactuator``;
integrators Euler, implicitfast and RK4; both cones, every solver (the solve is exact: a
converged answer is unique); disable flags (a disabled part is left out as MuJoCo leaves it
out); the energy flag (it only reports); sensors jointpos, jointvel, framepos, framequat,
framelinvel, frameangvel, subtreecom, gyro, accelerometer, velocimeter, touch (their cutoff
applied; noise is metadata MuJoCo does not apply); tendons that act on nothing (no limit,
spring, damper, friction loss, armature, actuator, equality or sensor uses them).

Everything else that changes the physics is refused: tendons that act, plugins, flex, mocap
bodies, other sensors, sensor delay or history, other transmissions, activation dynamics,
muscle or user gains and biases, actuator delay, damping or armature, multi-control actuators,
polynomial springs and dampers, plasticity, gravity compensation, fluid forces, the implicit
and discrete integrators, implicitfast on a free body with no joint below it (MuJoCo 4 steps it
with a 6 x 6 solve of its own, gyroscopic terms included), noslip, the override, sleep, diagexact, IPC and speculative flags,
tendon and flex equality constraints."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..model.mjcf import mujoco_module

SENSORS = ("jointpos", "jointvel", "framepos", "framequat", "framelinvel", "frameangvel", "subtreecom", "gyro",
           "accelerometer", "velocimeter", "touch")
INTEGRATORS = ("euler", "implicitfast", "rk4")
# enable flags that change the physics (energy, fwdinv and invdiscrete only report or act on mj_inverse)
REFUSED_ENABLE = ("override", "sleep", "diagexact", "ipc", "speculative")


def _name(m, obj, i):
    """MuJoCo's name of object ``i`` of kind ``obj`` ("mjOBJ_JOINT"...), or ``<kind> <i>``."""
    mujoco = mujoco_module()
    kind = getattr(mujoco.mjtObj, obj)
    return repr(mujoco.mj_id2name(m, kind, i) or f"{obj[6:].lower()} {i}")


def _enum_name(enum, value, prefix):
    """The lower-case name of an enum value (mjtSensor.mjSENS_TOUCH -> "touch")."""
    try:
        return enum(int(value)).name[len(prefix):].lower()
    except ValueError:
        return f"type {int(value)}"


def _ints(*values):
    """Enum values as ints (MjModel's arrays hold ints; pybind11's enums do not compare in ``in``)."""
    return tuple(int(v) for v in values)


def _nonzero(a):
    return bool(np.any(np.asarray(a) != 0))


def _tendons(m, mujoco):
    """The tendons that act, each with what makes it act."""
    used = {}
    for t in range(m.ntendon):
        why = [w for w, on in (("limited", m.tendon_limited[t]), ("stiffness", m.tendon_stiffness[t]),
                               ("polynomial stiffness", _nonzero(m.tendon_stiffnesspoly[t])),
                               ("damping", m.tendon_damping[t]), ("polynomial damping", _nonzero(m.tendon_dampingpoly[t])),
                               ("friction loss", m.tendon_frictionloss[t]), ("armature", m.tendon_armature[t]),
                               ("actuator force range", m.tendon_actfrclimited[t])) if on]
        if why:
            used[t] = why
    for i in range(m.nu):
        if int(m.actuator_trntype[i]) == int(mujoco.mjtTrn.mjTRN_TENDON):
            used.setdefault(int(m.actuator_trnid[i, 0]), []).append("an actuator")
    for e in range(m.neq):
        if int(m.eq_type[e]) == int(mujoco.mjtEq.mjEQ_TENDON):
            for t in (m.eq_obj1id[e], m.eq_obj2id[e]):
                if t >= 0:
                    used.setdefault(int(t), []).append("an equality")
    for s in range(m.nsensor):
        if int(m.sensor_objtype[s]) == int(mujoco.mjtObj.mjOBJ_TENDON):
            used.setdefault(int(m.sensor_objid[s]), []).append("a sensor")
    return [f"tendon {_name(m, 'mjOBJ_TENDON', t)} ({', '.join(why)})" for t, why in sorted(used.items())]


def _joints(m):
    """Joints whose polynomial springs or dampers or plasticity are not modelled."""
    out = []
    for j in range(m.njnt):
        name = _name(m, "mjOBJ_JOINT", j)
        dofs = slice(m.jnt_dofadr[j], m.jnt_dofadr[j] + {0: 6, 1: 3}.get(int(m.jnt_type[j]), 1))
        if _nonzero(m.jnt_stiffnesspoly[j]):
            out.append(f"joint {name} (polynomial stiffness)")
        if _nonzero(m.dof_dampingpoly[dofs]):
            out.append(f"joint {name} (polynomial damping)")
        if m.jnt_springyield[j] != 0 or m.jnt_plasticadr[j] >= 0:
            out.append(f"joint {name} (plasticity)")
        if m.jnt_actgravcomp[j]:
            out.append(f"joint {name} (gravity compensation through actuators)")
    return out


def _actuators(m, mujoco):
    """Actuators this package does not model, each with the reason."""
    out = []
    if m.nu != m.nactuator or m.nout != m.nactuator:
        out.append(f"multi-control actuators (nu {m.nu}, nout {m.nout}, {m.nactuator} actuators)")
    joint_trn = _ints(mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT)
    axial = _ints(mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)
    for i in range(m.nactuator):
        name = _name(m, "mjOBJ_ACTUATOR", i)
        why = []
        trn = int(m.actuator_trntype[i])
        if trn not in joint_trn:
            why.append(f"{_enum_name(mujoco.mjtTrn, trn, 'mjTRN_')} transmission")
        elif int(m.jnt_type[m.actuator_trnid[i, 0]]) not in axial:
            why.append("a transmission on a ball or free joint")
        if int(m.actuator_dyntype[i]) != int(mujoco.mjtDyn.mjDYN_NONE):
            why.append(f"{_enum_name(mujoco.mjtDyn, m.actuator_dyntype[i], 'mjDYN_')} dynamics")
        if int(m.actuator_gaintype[i]) not in _ints(mujoco.mjtGain.mjGAIN_FIXED, mujoco.mjtGain.mjGAIN_AFFINE):
            why.append(f"{_enum_name(mujoco.mjtGain, m.actuator_gaintype[i], 'mjGAIN_')} gain")
        if int(m.actuator_biastype[i]) not in _ints(mujoco.mjtBias.mjBIAS_NONE, mujoco.mjtBias.mjBIAS_AFFINE):
            why.append(f"{_enum_name(mujoco.mjtBias, m.actuator_biastype[i], 'mjBIAS_')} bias")
        for what, value in (("delay", m.actuator_delay[i]), ("history", m.actuator_history[i, 0]),
                            ("damping", m.actuator_damping[i]), ("polynomial damping", _nonzero(m.actuator_dampingpoly[i])),
                            ("armature", m.actuator_armature[i]), ("plugin", m.actuator_plugin[i] >= 0)):
            if value:
                why.append(what)
        if why:
            out.append(f"actuator {name} ({', '.join(why)})")
    return out


def _sensors(m, mujoco):
    """Sensors of other types, or with delay, interval or history."""
    out = []
    for s in range(m.nsensor):
        kind = _enum_name(mujoco.mjtSensor, m.sensor_type[s], "mjSENS_")
        name = _name(m, "mjOBJ_SENSOR", s)
        if kind not in SENSORS:
            out.append(f"sensor {name} ({kind})")
        elif m.sensor_delay[s] or m.sensor_interval[s, 0] or m.sensor_history[s, 0]:
            out.append(f"sensor {name} (delay, interval or history)")
        elif kind.startswith("frame") and int(mujoco.mjtObj.mjOBJ_CAMERA) in _ints(m.sensor_objtype[s], m.sensor_reftype[s]):
            out.append(f"sensor {name} (a camera frame)")
    return out


def _equalities(m, mujoco):
    eq = mujoco.mjtEq
    return [f"equality {_name(m, 'mjOBJ_EQUALITY', e)} ({_enum_name(eq, m.eq_type[e], 'mjEQ_')})"
            for e in range(m.neq) if int(m.eq_type[e]) not in _ints(eq.mjEQ_CONNECT, eq.mjEQ_WELD, eq.mjEQ_JOINT)]


def _options(m, mujoco):
    """Integrator, noslip, fluid and flags that change the physics."""
    o, out = m.opt, []
    integrator = _enum_name(mujoco.mjtIntegrator, o.integrator, "mjINT_")
    if integrator not in INTEGRATORS:
        out.append(f"the {integrator} integrator (Euler, implicitfast and RK4 are supported)")
    if integrator == "implicitfast":
        out += [f"implicitfast with the rigid free body {_name(m, 'mjOBJ_BODY', b)} (MuJoCo steps it with its own 6 x 6 "
                f"solve, gyroscopic terms included)" for b in _rigid_free_bodies(m)]
    if o.noslip_iterations > 0:
        out.append("the noslip solver (noslip_iterations > 0)")
    if o.density != 0 or o.viscosity != 0:
        out.append("fluid forces (density or viscosity not 0)")
    for flag in REFUSED_ENABLE:
        if o.enableflags & getattr(mujoco.mjtEnableBit, f"mjENBL_{flag.upper()}"):
            out.append(f"the {flag} flag")
    return out


def _rigid_free_bodies(m):
    """Bodies on a free joint with no other joint below them (MuJoCo 4's implicitfast treats them apart)."""
    out = []
    for j in range(m.njnt):
        if int(m.jnt_type[j]) != 0:
            continue
        b = int(m.jnt_bodyid[j])
        below = [c for c in range(b + 1, m.nbody) if _descends(m, c, b)]
        if not any(m.body_jntnum[c] for c in below):
            out.append(b)
    return out


def _descends(m, c, b):
    while c > b:
        c = int(m.body_parentid[c])
    return c == b


def unsupported(m):
    """Everything ``m`` uses that this package does not model, one phrase each (empty: supported)."""
    mujoco = mujoco_module()
    out = _options(m, mujoco) + _joints(m) + _tendons(m, mujoco) + _actuators(m, mujoco)
    out += _sensors(m, mujoco) + _equalities(m, mujoco)
    for what, count in (("plugins", m.nplugin), ("flex objects", m.nflex), ("mocap bodies", m.nmocap),
                        ("history buffers", m.nhistory), ("plastic state", m.nplastic)):
        if count:
            out.append(f"{what} ({count})")
    grav = [_name(m, "mjOBJ_BODY", b) for b in range(m.nbody) if m.body_gravcomp[b]]
    if grav:
        out.append(f"gravity compensation (bodies {', '.join(grav)})")
    return out


def check(m, label=None):
    """A ModelError naming everything ``m`` uses that is not modelled, in one line; None when supported."""
    bad = unsupported(m)
    if bad:
        shown = "; ".join(bad[:8]) + (f"; and {len(bad) - 8} more" if len(bad) > 8 else "")
        raise ModelError(f"MuJoCo model {label or _model_label(m)}: not supported: {shown}")


def _model_label(m):
    name = m.names.split(b"\0", 1)[0].decode()
    return repr(name) if name and name != "MuJoCo Model" else "(unnamed)"


def uses(m):
    """What ``m`` uses, by part: counts and option names (the things the supported list names)."""
    mujoco = mujoco_module()
    o, jt = m.opt, mujoco.mjtJoint
    sensors = {}
    for s in range(m.nsensor):
        kind = _enum_name(mujoco.mjtSensor, m.sensor_type[s], "mjSENS_")
        sensors[kind] = sensors.get(kind, 0) + 1
    return {
        "integrator": _enum_name(mujoco.mjtIntegrator, o.integrator, "mjINT_"),
        "cone": _enum_name(mujoco.mjtCone, o.cone, "mjCONE_"),
        "solver": _enum_name(mujoco.mjtSolver, o.solver, "mjSOL_"),
        "joints": {k: int(np.sum(m.jnt_type == getattr(jt, f"mjJNT_{k.upper()}"))) for k in ("free", "ball", "hinge", "slide")},
        "armature": int(np.count_nonzero(m.dof_armature)),
        "damping": int(np.count_nonzero(m.dof_damping)),
        "stiffness": int(np.count_nonzero(m.jnt_stiffness)),
        "frictionloss": int(np.count_nonzero(m.dof_frictionloss)),
        "limits": int(np.count_nonzero(m.jnt_limited)),
        "equality": {k: int(np.sum(m.eq_type == getattr(mujoco.mjtEq, f"mjEQ_{k.upper()}"))) for k in ("connect", "weld", "joint")},
        "actuators": int(m.nu),
        "sensors": sensors,
        "inert tendons": int(m.ntendon - len(_tendons(m, mujoco))),
        "geoms": int(m.ngeom),
    }
