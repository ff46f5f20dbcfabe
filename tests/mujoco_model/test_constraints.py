"""constraints.py against MuJoCo's efc arrays after mj_forward, contacts taken from its data.contact:
efc_type, efc_id, efc_J, efc_pos, efc_margin, efc_frictionloss, efc_R, efc_D and efc_aref (≤ 1e-9
relative) for every row type — equality connect (bodies, sites), weld (relpose, torquescale), joint
(polynomial), friction loss, hinge/slide/ball limits, contacts of condim 1, 3, 4 and 6 (a pair with
its own solreffriction) under both cones."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model.constraints import (ELLIPTIC, EQUALITY, FRICTION_DOF, FRICTIONLESS, LIMIT_JOINT,
                                                      PYRAMIDAL, EfcFunction, contacts_from_data)

from .common import load, mujoco, random_state, relative

FIELDS = {"J": "efc_J", "pos": "efc_pos", "margin": "efc_margin", "frictionloss": "efc_frictionloss", "R": "efc_R",
          "D": "efc_D", "aref": "efc_aref"}


def compare(name, cone, states, seed=0, height=(0.0, 0.4)):
    """(worst relative error per field, the row types seen, the contact condims seen)."""
    m = load(name, cone)
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    functions, worst, types, dims = {}, dict.fromkeys(FIELDS, 0.0), set(), set()
    for _ in range(states):
        random_state(m, d, rng, height)
        contacts = contacts_from_data(m, d)
        key = tuple(c.static() for c in contacts)
        if key not in functions:
            functions[key] = EfcFunction(m, contacts)
        rows = functions[key](d.qpos, d.qvel, contacts)
        assert rows["type"].tolist() == d.efc_type.tolist() and rows["id"].tolist() == d.efc_id.tolist()
        ref = {k: getattr(d, v) for k, v in FIELDS.items()}
        ref["J"] = d.efc_J.reshape(d.nefc, m.nv)
        for k in FIELDS:
            worst[k] = max(worst[k], relative(rows[k], ref[k]))
        types |= set(d.efc_type.tolist())
        dims |= {c.dim for c in contacts}
    return worst, types, dims


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_every_row_type_equals_mujoco(cone):
    worst, types, dims = compare("mjcf_rig", cone, 30, height=(0.0, 0.15))
    assert max(worst.values()) < 1e-9, worst
    contact = PYRAMIDAL if cone == "pyramidal" else ELLIPTIC
    assert {EQUALITY, FRICTION_DOF, LIMIT_JOINT, FRICTIONLESS, contact} <= types and dims == {1, 3, 4, 6}


@pytest.mark.parametrize("name", ["mjcf_equality", "ant"])
def test_equality_rig_and_ant_equal_mujoco(name):
    worst, _, _ = compare(name, None, 20)
    assert max(worst.values()) < 1e-9, worst


def test_ball_limits_become_rows_past_their_margin():
    """The rig's ball neck (range 0.6, margin 0.01) gives one row exactly where its angle passes 0.59."""
    m = load("mjcf_rig")
    d = mujoco.MjData(m)
    f = EfcFunction(m)
    neck = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, "neck")
    a = m.jnt_qposadr[neck]
    for angle, present in ((0.58, False), (0.595, True), (0.7, True)):
        d.qpos[:] = m.qpos0
        d.qpos[a:a + 4] = [np.cos(angle / 2), 0, np.sin(angle / 2), 0]
        mujoco.mj_fwdPosition(m, d)
        rows = f(d.qpos, d.qvel)
        ours = bool(np.any((rows["type"] == LIMIT_JOINT) & (rows["id"] == neck)))
        theirs = bool(np.any((d.efc_type == LIMIT_JOINT) & (d.efc_id == neck)))
        assert ours == theirs == present


def test_connect_and_weld_reference_accelerations_take_the_jacobian_derivative():
    """MuJoCo 4's efc_aref on connect and weld rows is −B·vel − K·d·(pos − margin) − J̇·qvel (measured;
    J̇·qvel by central differences of efc_J along qvel); joint equalities have no such term."""
    m = load("mjcf_equality")
    d, rng = mujoco.MjData(m), np.random.default_rng(3)
    random_state(m, d, rng)
    K = d.efc_KBIP.reshape(-1, 4)
    plain = -K[:, 1] * d.efc_vel - K[:, 0] * K[:, 2] * (d.efc_pos - d.efc_margin)
    J = []
    q0 = d.qpos.copy()
    for eps in (1e-6, -1e-6):
        d.qpos[:] = q0
        mujoco.mj_integratePos(m, d.qpos, d.qvel, eps)
        mujoco.mj_fwdPosition(m, d)
        J.append(d.efc_J.reshape(d.nefc, m.nv).copy())
    d.qpos[:] = q0
    mujoco.mj_forward(m, d)
    jdot_v = (J[0] - J[1]) @ d.qvel / 2e-6
    joint = d.efc_id == mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, "coupled")
    assert np.abs(d.efc_aref - plain + jdot_v)[~joint].max() < 1e-6 * np.abs(jdot_v).max()
    assert np.abs(jdot_v[~joint]).max() > 1e-2 and np.all(d.efc_aref[joint] == plain[joint])
    ours = EfcFunction(m)(d.qpos, d.qvel)
    assert relative(ours["aref"], d.efc_aref) < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("name", ["go2", "g1", "h1", "humanoid", "walker2d_v5", "hopper"])
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_the_issue_robots_rows_equal_mujoco(name, cone):
    worst, _, _ = compare(name, cone, 30)
    assert max(worst.values()) < 1e-9, worst
