"""mujoco_model/pairs.py: which geom pairs collide, in which order and with which parameters, as
MuJoCo's collision driver decides (checked against ``data.contact`` where every allowed pair
touches), and the refusal, by name, of pair kinds we do not generate."""
import numpy as np
import pytest

from casadi_delassus.errors import ModelError
from casadi_delassus.mujoco_model import collision as C
from casadi_delassus.mujoco_model.pairs import collision_pairs

from .mj_scenes import agreement, check, mujoco, robosuite_spec

# every geom near the origin: each allowed pair touches.  The world's floor and a static sphere;
# a free root with two geoms (the midphase orders its contacts by geom), a hinged child and
# grandchild (parent filter), a jointless body welded to the grandchild, contype/conaffinity
# that match or not, an excluded body pair, explicit pairs (one between parent and child), and
# priority, solmix, direct solref, margins and gaps to mix
CROWD = """<mujoco><option gravity="0 0 0" impratio="3"/><worldbody>
  <geom name="floor" type="plane" size="0 0 1" friction="0.8 0.01 0.002" solmix="2"/>
  <body name="static" pos="0.02 0 0"><geom name="st" type="sphere" size="0.1"/></body>
  <body name="root"><freejoint/>
    <geom name="r1" type="capsule" size="0.05 0.1" priority="1" condim="1"/>
    <geom name="r2" type="sphere" size="0.08" solref="-1000 -10"/>
    <body name="child"><joint type="hinge" axis="0 1 0"/><geom name="c1" type="sphere" size="0.07" solmix="0"/>
      <body name="grandchild"><joint type="hinge" axis="1 0 0"/>
        <geom name="g1" type="capsule" size="0.04 0.1" margin="0.01" gap="0.005" solref="0.05 0.7"/>
        <body name="welded" pos="0.01 0 0"><geom name="w1" type="sphere" size="0.05" contype="3" conaffinity="3"/></body>
      </body>
    </body>
  </body>
  <body name="other"><freejoint/>
    <geom name="o1" type="sphere" size="0.06" contype="2" conaffinity="1" condim="6"/>
    <geom name="o2" type="capsule" size="0.03 0.1" contype="4" conaffinity="4"/>
  </body>
  <body name="third"><freejoint/><geom name="t1" type="capsule" size="0.05 0.05" solimp="0.8 0.9 0.01 0.3 4" solmix="5"/></body>
</worldbody>
<contact>
  <exclude body1="root" body2="third"/>
  <pair geom1="c1" geom2="r2" condim="4" friction="0.4 0.4 0.01 0.001 0.001" margin="0.02" gap="0.01" solreffriction="0.03 1"/>
  <pair geom1="t1" geom2="o1" condim="1"/>
</contact></mujoco>"""


def crowded_states(m, n, rng):
    """qpos0 (everything at the origin) moved by up to 3 cm and turned a little (centres apart:
    a normal between nearly coincident points carries their rounding over their distance)."""
    Q = np.tile(m.qpos0, (n, 1))
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            Q[:, a:a + 3] += rng.uniform(-0.03, 0.03, (n, 3))
            quat = np.c_[np.ones(n), rng.normal(scale=0.3, size=(n, 3))]
            Q[:, a + 3:a + 7] = quat / np.linalg.norm(quat, axis=1)[:, None]
        else:
            Q[:, a] = rng.uniform(-0.3, 0.3, n)
    return Q


def names(m, pairs):
    return {(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, p.geom1), mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, p.geom2))
            for p in pairs}


@pytest.mark.parametrize("flags", ["default", "filterparent off", "override", "midphase off"])
def test_pairs_order_and_parameters_are_mujocos(flags):
    m = mujoco.MjModel.from_xml_string(CROWD)
    if flags == "filterparent off":
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    elif flags == "midphase off":
        m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MIDPHASE
    elif flags == "override":
        m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_OVERRIDE
        m.opt.o_margin, m.opt.o_solref, m.opt.o_friction = 0.003, [0.04, 0.9], [0.5, 0.5, 0.01, 0.002, 0.002]
        m.opt.o_solimp = [0.7, 0.8, 0.002, 0.5, 2]
    layout = C.contact_layout(m)
    found = names(m, [ps.pair for ps in layout.pairs])
    assert ("floor", "st") not in found and ("st", "floor") not in found          # both fixed in the world
    assert not {("w1", "g1"), ("g1", "w1")} & found                             # welded together
    assert not {p for p in found if "t1" in p and ({"r1", "r2"} & set(p))}      # excluded
    assert ("r2", "c1") in found or ("c1", "r2") in found                       # an explicit pair across the parent filter
    assert (("c1", "g1") in found) == (flags == "filterparent off")             # parent and child
    result = agreement(m, layout, crowded_states(m, 40, np.random.default_rng(0)))
    check(result)
    assert result.contacts >= 40 * len(layout.pairs)                              # every pair touched at every state


def test_mixing_follows_priority_solmix_and_direct_solref():
    m = mujoco.MjModel.from_xml_string(CROWD)
    pairs = {names(m, [p]).pop(): p for p in collision_pairs(m)}
    r1_st = pairs[("st", "r1")]                                   # r1 has the higher priority: its parameters
    assert r1_st.condim == 1 and r1_st.mu == 0 and r1_st.friction == (1, 1, 0.005, 0.0001, 0.0001)
    r2_o1 = pairs[("r2", "o1")]                                   # a direct solref: the minimum, solimp mixed 1:1
    assert r2_o1.solref == (-1000, -10) and r2_o1.condim == 6
    t1_floor = pairs[("floor", "t1")]                             # solmix 2 against 5
    np.testing.assert_allclose(t1_floor.solimp, 2 / 7 * np.array([0.9, 0.95, 0.001, 0.5, 2]) + 5 / 7 * np.array(
        [0.8, 0.9, 0.01, 0.3, 4]), rtol=1e-15)
    assert t1_floor.friction == (1, 1, 0.01, 0.002, 0.002) and t1_floor.mu == pytest.approx(1 / np.sqrt(3))
    explicit = pairs[("r2", "c1")]
    assert explicit.pair >= 0 and explicit.margin == 0.02 and explicit.gap == 0.01 and explicit.solreffriction == (0.03, 1)


REFUSED = {
    "box-capsule": ('<body name="A"><freejoint/><geom name="a" type="box" size=".1 .1 .1"/></body>'
                    '<body name="B"><freejoint/><geom name="b" type="capsule" size=".1 .1"/></body>',
                    "model 'refused': geoms 'a' (box) and 'b' (capsule) on bodies 'A' and 'B' can collide; "
                    "capsule-box contacts are not supported"),
    "mocap": ('<body name="M" mocap="true"><geom name="m" type="sphere" size=".1"/></body>',
              "model 'refused': geom 'm' (sphere) on the mocap body 'M' can collide; contacts of mocap bodies are "
              "not supported"),
    "hfield": ('<geom name="h" type="hfield" hfield="h"/><body name="B"><freejoint/><geom name="b" type="sphere" size=".1"/></body>',
               "model 'refused': geoms 'h' (hfield) and 'b' (sphere) on bodies 'world' and 'B' can collide; "
               "hfield-sphere contacts are not supported"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_pair_kind_we_do_not_generate_is_refused_by_name(case):
    body, message = REFUSED[case]
    m = mujoco.MjModel.from_xml_string(
        f'<mujoco model="refused"><asset><hfield name="h" nrow="2" ncol="2" size="1 1 .1 .1"/></asset>'
        f'<worldbody><geom name="floor" type="plane" size="1 1 1"/>{body}</worldbody></mujoco>')
    with pytest.raises(ModelError) as err:
        C.contact_layout(m)
    assert str(err.value) == message


def test_a_kind_that_cannot_collide_by_the_filters_is_not_refused():
    """box-capsule between parent and child, excluded, or with contype/conaffinity apart: no pair."""
    m = mujoco.MjModel.from_xml_string("""<mujoco><worldbody>
      <body name="A"><freejoint/><geom type="box" size=".1 .1 .1"/>
        <body name="B"><joint/><geom type="capsule" size=".1 .1" contype="3" conaffinity="3"/></body></body>
      <body name="C"><freejoint/><geom type="box" size=".1 .1 .1" contype="2" conaffinity="2"/></body>
      <body name="D"><freejoint/><geom type="capsule" size=".1 .1" contype="8" conaffinity="8"/></body>
    </worldbody><contact><exclude body1="C" body2="B"/></contact></mujoco>""")
    assert collision_pairs(m) == []


def test_robots_that_collide_between_bodies_are_refused_as_shipped():
    """Go2, G1 and H1 as shipped (a floor added) can collide between bodies through boxes,
    cylinders and meshes: refused, naming the first such pair."""
    for name, kind in (("go2", "box-box"), ("g1", "mesh-mesh"), ("h1", "mesh-mesh")):
        with pytest.raises(ModelError, match=f"can collide; {kind} contacts are not supported"):
            collision_pairs(robosuite_spec(name).compile(), name)


def test_what_the_driver_does_that_we_do_not_is_refused_and_disabled_contacts_give_none():
    m = mujoco.MjModel.from_xml_string(CROWD)
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_SLEEP
    with pytest.raises(ModelError, match="sleeping bodies"):
        collision_pairs(m, "crowd")
    m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom type="plane" size="1 1 1"/><flexcomp name="f" '
                                       'type="grid" count="2 2 1" spacing=".1 .1 .1" dim="2"/></worldbody></mujoco>')
    with pytest.raises(ModelError, match="flex contacts are not supported"):
        collision_pairs(m, "flex")
    m = mujoco.MjModel.from_xml_string(CROWD)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    assert collision_pairs(m) == [] and C.contact_layout(m).nslot == 0
