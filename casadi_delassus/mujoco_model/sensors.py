"""MuJoCo's sensors over casadi.SX, the ones features.py accepts (MuJoCo's XML reference,
"sensor"; the method of engine_sensor.c, written anew), in sensordata's layout (sensor_adr):

- jointpos, jointvel: a hinge's or slide's qpos, qvel;
- framepos, framequat: the object's world position and orientation (xbody: the body frame,
  body: its inertial frame, geom, site), or relative to a reference object's frame:
  R_refᵀ (p − p_ref), q_ref⁻¹ q;
- framelinvel, frameangvel: the object's point's linear and angular velocity in the world, or
  relative to the reference frame: R_refᵀ (v − v_ref − ω_ref × (p − p_ref)), R_refᵀ (ω − ω_ref);
- subtreecom: the subtree's centre of mass;
- gyro, velocimeter: the site's angular and linear velocity in the site's axes;
- accelerometer: R_siteᵀ (p̈ − g), the site's classical acceleration less gravity (at the
  constrained qacc), in the site's axes;
- touch: the sum of the normal forces of the contacts on the site's body whose ray from the
  contact point along the normal (turned away from that body when it is the contact's second)
  meets the site's volume (sphere, capsule, ellipsoid, cylinder, box) at a distance ≥ 0.

A positive cutoff clamps real values to [−cutoff, cutoff] and touch to at most cutoff
(quaternions are not clamped).  Sensor noise is metadata MuJoCo does not apply.  sensordata
is computed at the forward of the state before a step (integrators.py)."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..model.mjcf import mujoco_module
from .constraints import FRICTIONLESS, PYRAMIDAL
from .kinematics import quat_conj, quat_mul

OBJECTS = {"mjOBJ_XBODY": "xbody", "mjOBJ_BODY": "body", "mjOBJ_GEOM": "geom", "mjOBJ_SITE": "site"}


def _object(m, objtype, objid):
    """(frame kind for Kinematics.frame, the body it moves with) of a sensor's object."""
    mujoco = mujoco_module()
    name = mujoco.mjtObj(int(objtype)).name
    kind = OBJECTS[name]
    body = {"geom": m.geom_bodyid, "site": m.site_bodyid}[kind][objid] if kind in ("geom", "site") else objid
    return kind, int(body)


def _frame_velocity(kin, kind, body, i, v):
    """(position, rotation, linear velocity of the point, angular velocity) of an object."""
    p, _, R = kin.frame(kind, i)
    lin, ang = kin.point_velocity(body, p, v)
    return p, R, lin, ang


def _frame_sensor(kin, m, s, v):
    """framepos, framequat, framelinvel, frameangvel of sensor s."""
    mujoco = mujoco_module()
    kind_s = int(m.sensor_type[s])
    kind, body = _object(m, m.sensor_objtype[s], int(m.sensor_objid[s]))
    oid = int(m.sensor_objid[s])
    ref = int(m.sensor_refid[s])
    rkind, rbody = _object(m, m.sensor_reftype[s], ref) if ref >= 0 else (None, None)
    T = mujoco.mjtSensor
    if kind_s == int(T.mjSENS_FRAMEPOS):
        p = kin.frame(kind, oid)[0]
        if ref < 0:
            return p
        pr, _, Rr = kin.frame(rkind, ref)
        return ca.mtimes(Rr.T, p - pr)
    if kind_s == int(T.mjSENS_FRAMEQUAT):
        q = kin.frame(kind, oid)[1]
        return q if ref < 0 else quat_mul(quat_conj(kin.frame(rkind, ref)[1]), q)
    p, _, lin, ang = _frame_velocity(kin, kind, body, oid, v)
    if ref >= 0:
        pr, Rr, lin_r, ang_r = _frame_velocity(kin, rkind, rbody, ref, v)
    if kind_s == int(T.mjSENS_FRAMELINVEL):
        return lin if ref < 0 else ca.mtimes(Rr.T, lin - lin_r - ca.cross(ang_r, p - pr))
    return ang if ref < 0 else ca.mtimes(Rr.T, ang - ang_r)


def _site_sensor(kin, m, s, v, qacc, contacts, normal_forces):
    """gyro, velocimeter, accelerometer, touch of sensor s (its object is a site)."""
    mujoco = mujoco_module()
    T = mujoco.mjtSensor
    kind_s, site = int(m.sensor_type[s]), int(m.sensor_objid[s])
    body = int(m.site_bodyid[site])
    p, _, R = kin.frame("site", site)
    if kind_s == int(T.mjSENS_TOUCH):
        return _touch(m, site, body, p, R, contacts, normal_forces)
    if kind_s == int(T.mjSENS_ACCELEROMETER):
        acc = kin.point_acceleration(body, p, v, qacc)[0]
        return ca.mtimes(R.T, acc - ca.DM(_gravity(m)))
    lin, ang = kin.point_velocity(body, p, v)
    return ca.mtimes(R.T, ang if kind_s == int(T.mjSENS_GYRO) else lin)


def _gravity(m):
    mujoco = mujoco_module()
    off = m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY)
    return np.zeros(3) if off else np.array(m.opt.gravity, float)


def _touch(m, site, body, p, R, contacts, normal_forces):
    """Σ normal force of the contacts on ``body`` whose normal ray meets the site's volume."""
    total = ca.SX(0)
    for c, fn in zip(contacts, normal_forces):
        if body not in (c.body1, c.body2):
            continue
        frame = c.frame if isinstance(c.frame, ca.SX) else ca.DM(np.asarray(c.frame, float).reshape(3, 3))
        pos = c.pos if isinstance(c.pos, ca.SX) else ca.DM(np.asarray(c.pos, float))
        normal = frame[0, :].T * (-1.0 if body == c.body2 else 1.0)
        start, direction = ca.mtimes(R.T, pos - p), ca.mtimes(R.T, normal)
        hit = ray_hits(int(m.site_type[site]), np.array(m.site_size[site], float), start, direction)
        total = total + ca.if_else(ca.logic_and(hit, fn > 0), fn, 0)
    return total


def _interval_ball(p, u, scale, radius=1.0):
    """(lo, hi, hit) of x with ‖(p + x u)/scale‖ ≤ radius (an ellipsoid's, or a sphere's)."""
    ps, us = p / scale, u / scale
    A, B, C = ca.dot(us, us), ca.dot(ps, us), ca.dot(ps, ps) - radius * radius
    disc = B * B - A * C
    root = ca.sqrt(ca.fmax(disc, 0))
    return (-B - root) / A, (-B + root) / A, disc >= 0


def _interval_slab(p, u, half):
    """(lo, hi, hit) of x with |p + x u| ≤ half along one axis."""
    safe = ca.if_else(ca.fabs(u) > 1e-15, u, 1.0)
    a, b = (-half - p) / safe, (half - p) / safe
    inside = ca.fabs(p) <= half
    big = 1e300
    lo = ca.if_else(ca.fabs(u) > 1e-15, ca.fmin(a, b), ca.if_else(inside, -big, big))
    hi = ca.if_else(ca.fabs(u) > 1e-15, ca.fmax(a, b), ca.if_else(inside, big, -big))
    return lo, hi, lo <= hi


def _meet(*intervals):
    """Whether the intervals overlap somewhere at x ≥ 0."""
    lo = intervals[0][0]
    hi = intervals[0][1]
    ok = intervals[0][2]
    for a, b, h in intervals[1:]:
        lo, hi, ok = ca.fmax(lo, a), ca.fmin(hi, b), ca.logic_and(ok, h)
    return ca.logic_and(ok, ca.logic_and(lo <= hi, hi >= 0))


def ray_hits(geom_type, size, p, u):
    """Whether the ray p + x u, x ≥ 0 (site coordinates) meets a site volume (SX 0/1)."""
    mujoco = mujoco_module()
    G = mujoco.mjtGeom
    if geom_type == int(G.mjGEOM_SPHERE):
        return _meet(_interval_ball(p, u, 1.0, float(size[0])))
    if geom_type == int(G.mjGEOM_ELLIPSOID):
        return _meet(_interval_ball(p, u, ca.DM(size)))
    if geom_type == int(G.mjGEOM_BOX):
        return _meet(*[_interval_slab(p[k], u[k], float(size[k])) for k in range(3)])
    radius, half = float(size[0]), float(size[1])
    disc = _interval_ball(ca.vertcat(p[0], p[1]), ca.vertcat(u[0], u[1]), 1.0, radius)
    side = _meet(disc, _interval_slab(p[2], u[2], half))
    if geom_type == int(G.mjGEOM_CYLINDER):
        return side
    caps = [_meet(_interval_ball(p - ca.DM([0, 0, z]), u, 1.0, radius)) for z in (-half, half)]
    return ca.logic_or(side, ca.logic_or(*caps))


def _cutoff(m, s, value):
    """The sensor's value clamped by its cutoff (real: ±cutoff, touch: ≤ cutoff; not quaternions)."""
    mujoco = mujoco_module()
    cutoff = float(m.sensor_cutoff[s])
    datatype = int(m.sensor_datatype[s])
    if cutoff <= 0:
        return value
    if datatype == int(mujoco.mjtDataType.mjDATATYPE_REAL):
        return ca.fmin(ca.fmax(value, -cutoff), cutoff)
    if datatype == int(mujoco.mjtDataType.mjDATATYPE_POSITIVE):
        return ca.fmin(value, cutoff)
    return value


def sensordata(kin, v, qacc, contacts=(), normal_forces=()):
    """sensordata (SX, nsensordata) at Kinematics ``kin``, qvel v, the constrained qacc, and the
    contacts with their normal forces (elliptic and frictionless: the normal row's efc_force;
    pyramidal: the sum over its edges)."""
    m = kin.m
    mujoco = mujoco_module()
    T = mujoco.mjtSensor
    out = []
    if m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_SENSOR):
        return ca.SX(0, 1) if not m.nsensordata else ca.SX.zeros(m.nsensordata, 1)
    for s in range(m.nsensor):
        kind = int(m.sensor_type[s])
        obj = int(m.sensor_objid[s])
        if kind == int(T.mjSENS_JOINTPOS):
            value = kin.q[int(m.jnt_qposadr[obj])]
        elif kind == int(T.mjSENS_JOINTVEL):
            value = v[int(m.jnt_dofadr[obj])]
        elif kind == int(T.mjSENS_SUBTREECOM):
            value = kin.subtree_com(obj)
        elif kind in (int(T.mjSENS_FRAMEPOS), int(T.mjSENS_FRAMEQUAT), int(T.mjSENS_FRAMELINVEL),
                      int(T.mjSENS_FRAMEANGVEL)):
            value = _frame_sensor(kin, m, s, v)
        else:
            value = _site_sensor(kin, m, s, v, qacc, contacts, normal_forces)
        out.append(_cutoff(m, s, ca.vertcat(value)))
    return ca.vertcat(*out) if out else ca.SX(0, 1)


def normal_forces(efc, force, ncontacts):
    """Each contact's normal force from an EfcFunction's rows ``efc`` (type, id) and their
    ``force``: its first row's (elliptic, frictionless) or the sum over its pyramid's edges."""
    out = np.zeros(ncontacts)
    contact = np.asarray(efc["type"]) >= FRICTIONLESS
    for cid in range(ncontacts):
        rows = np.flatnonzero(contact & (np.asarray(efc["id"]) == cid))
        if rows.size:
            out[cid] = force[rows].sum() if efc["type"][rows[0]] == PYRAMIDAL else force[rows[0]]
    return out
