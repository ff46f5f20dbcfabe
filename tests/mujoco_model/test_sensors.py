"""sensors.py against MuJoCo's sensordata after mj_forward (its qacc and efc_force as the inputs):
jointpos, jointvel, framepos, framequat, framelinvel, frameangvel (with and without reference
frames, objects xbody, body, geom, site), subtreecom, gyro, accelerometer, velocimeter, touch, and
cutoffs; the touch sensor's ray test against mju_rayGeom for every site shape."""
import casadi as ca
import numpy as np
import pytest

from casadi_delassus.mujoco_model.constraints import EfcFunction, contacts_from_data, symbolic_contacts
from casadi_delassus.mujoco_model.kinematics import Kinematics
from casadi_delassus.mujoco_model.sensors import normal_forces, ray_hits, sensordata

from .common import load, mujoco, random_state


def sensor_function(m, contacts):
    """casadi.Function (qpos, qvel, qacc, contact pos, frame, dist, normal forces) -> sensordata."""
    q, v, a = ca.SX.sym("q", m.nq), ca.SX.sym("v", m.nv), ca.SX.sym("a", m.nv)
    sym, (cp, cf, cd) = symbolic_contacts(contacts)
    fn = ca.SX.sym("fn", len(contacts))
    out = sensordata(Kinematics(m, q), v, a, sym, [fn[i] for i in range(len(contacts))])
    return ca.Function("sensors", [q, v, a, cp, cf, cd, fn], [out])


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_sensordata_equals_mujoco(cone):
    m = load("mjcf_rig", cone)
    d, rng = mujoco.MjData(m), np.random.default_rng(0)
    cache, worst, touched, clipped = {}, np.zeros(m.nsensordata), 0, 0
    gyro = m.sensor_adr[list(m.sensor_type).index(mujoco.mjtSensor.mjSENS_GYRO)]
    for _ in range(12):
        random_state(m, d, rng, height=(0.0, 0.2))
        contacts = contacts_from_data(m, d)
        key = tuple(c.static() for c in contacts)
        if key not in cache:
            cache[key] = (sensor_function(m, contacts), EfcFunction(m, contacts))
        f, efc = cache[key]
        forces = normal_forces(efc(d.qpos, d.qvel, contacts), d.efc_force, len(contacts))
        pos = np.concatenate([c.pos for c in contacts]) if contacts else np.zeros(0)
        frame = np.concatenate([np.ravel(c.frame) for c in contacts]) if contacts else np.zeros(0)
        out = np.array(f(d.qpos, d.qvel, d.qacc, pos, frame, [c.dist for c in contacts], forces)).ravel()
        worst = np.maximum(worst, np.abs(out - d.sensordata) / np.maximum(1, np.abs(d.sensordata)))
        touched += sum(d.sensordata[m.sensor_adr[s]] > 0 for s in range(m.nsensor) if m.sensor_type[s] == 0)
        clipped += np.any(np.abs(d.sensordata[gyro:gyro + 3]) == 0.5)
    assert worst.max() < 1e-12, worst
    assert touched >= 2 and clipped >= 2


@pytest.mark.parametrize("shape", ["sphere", "capsule", "ellipsoid", "cylinder", "box"])
def test_the_touch_ray_test_equals_mujoco(shape):
    """Random rays from points inside and around a site: hit or miss as mju_rayGeom says (≥ 0)."""
    kind = int(getattr(mujoco.mjtGeom, f"mjGEOM_{shape.upper()}"))
    size = np.array([0.3, 0.5, 0.4])
    p, u = ca.SX.sym("p", 3), ca.SX.sym("u", 3)
    hit = ca.Function("hit", [p, u], [ray_hits(kind, size, p, u)])
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(400):
        start, direction = rng.normal(size=3) * 0.6, rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        ref = mujoco.mju_rayGeom(np.zeros(3), np.eye(3).ravel(), size, start, direction, kind) >= 0
        assert bool(float(hit(start, direction))) == ref
        hits += ref
    assert 10 < hits < 390
