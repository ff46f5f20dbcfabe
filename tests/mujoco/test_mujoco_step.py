"""MuJoCo's soft contact model on the compiled step (mujoco_model/soft_step.py, codegen/ and runtime/mujoco_step.py): efc_force and qacc
equal MuJoCo's own after mj_forward (Newton to a tiny tolerance), standing and sliding, both cones."""
import numpy as np
import pytest

from casadi_delassus.mujoco_model import soft_contacts as mujoco_soft
from casadi_delassus import mujoco_contact_step
from casadi_delassus.mujoco_model.soft_step import mujoco_contacts, soft_parameters
from casadi_delassus.errors import ConstraintError, InputError, ModelError
from casadi_delassus.verify.mujoco_contact_scenes import scene, scene_path, state

from conftest import TEST_CFLAGS

mujoco = pytest.importorskip("mujoco")
try:
    scene_path("go2")
except ModelError:
    pytest.skip("robosuite-models (Go2's MJCF) is not installed", allow_module_level=True)


def relative(a, b):
    """max |a − b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def go2_step(tmp_path_factory):
    """One compiled step for go2's four feet (6d-world rows of the calves, points given at run time)."""
    m = scene("go2", "elliptic")
    specs = mujoco_contacts(m, state(m, "go2", "standing")).specs
    return mujoco_contact_step(m, specs, out_dir=tmp_path_factory.mktemp("mjsoft"), cflags=TEST_CFLAGS)


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
@pytest.mark.parametrize("sliding", [False, True])
def test_go2_equals_mujoco(go2_step, cone, sliding):
    m = scene("go2", cone)
    d = state(m, "go2", "sliding" if sliding else "standing")
    assert d.ncon == 4 and d.solver_niter[0] < m.opt.iterations
    r = go2_step.solve(m, d)
    assert r.status == "converged"
    assert relative(r.force, d.efc_force) <= 1e-6
    assert relative(r.qacc, d.qacc) <= 1e-6
    if sliding:         # the contacts act: not the unconstrained acceleration
        assert relative(r.qacc, d.qacc_smooth) > 1e-3


@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_one_step_serves_other_states(go2_step, cone):
    """The 6d-world step built at the home pose holds where the contact points have moved in their
    bodies: other joint angles, a tilted base, other penetrations, random velocities."""
    m = scene("go2", cone)
    d = state(m, "go2", "moved")
    assert d.ncon == 4 and len(set(np.round([d.contact[i].dist for i in range(4)], 6))) > 1
    r = go2_step.solve(m, d)
    assert relative(r.force, d.efc_force) <= 1e-6 and relative(r.qacc, d.qacc) <= 1e-6


def test_mixed_condims_equal_mujoco(tmp_path):
    """One foot through a condim-3 pair with its own friction and solreffriction, as a fixed point
    (3 world rows); three condim-6 feet on their bodies' 6d-world rows."""
    m = scene("go2", "elliptic", pair=True)
    d = state(m, "go2", "sliding")
    c = mujoco_contacts(m, d, fixed_points=True)
    assert [s.split(":")[1][:8] for s in c.specs] == ["3d-world"] + ["6d-world"] * 3
    assert c.dims.tolist() == [3, 6, 6, 6]
    r = mujoco_contact_step(m, c.specs, out_dir=tmp_path, cflags=TEST_CFLAGS).solve(m, d)
    assert relative(r.force, d.efc_force) <= 1e-6 and relative(r.qacc, d.qacc) <= 1e-6


@pytest.mark.parametrize("pair", [False, True])
@pytest.mark.parametrize("cone", ["elliptic", "pyramidal"])
def test_parameters_equal_mujoco(cone, pair):
    """R and a_ref from solref/solimp/impratio (and a pair's solreffriction) equal MuJoCo's efc_R
    and efc_aref; the efc rows its efc_J."""
    m = scene("go2", cone, pair=pair)
    d = state(m, "go2", "sliding")
    c = mujoco_contacts(m, d)
    pyramidal = cone == "pyramidal"
    R, B, Kr = soft_parameters(m, c, pyramidal)
    E = mujoco_soft.efc_rows(c.frames, c.friction, c.dims, pyramidal)
    Jp, Jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    rows = []
    for i in range(d.ncon):
        b = m.geom_bodyid[d.contact[i].geom].max()
        mujoco.mj_jac(m, d, Jp, Jr, d.contact[i].pos, b)
        rows.append(E[i] @ np.vstack([Jp, Jr]))
    J = np.vstack(rows)
    assert np.allclose(J, d.efc_J.reshape(d.nefc, m.nv), rtol=0, atol=1e-12)
    assert relative(R, d.efc_R) <= 1e-12
    assert relative(-B * (J @ d.qvel) - Kr, d.efc_aref) <= 1e-12


def test_impedance_shape():
    """d(r) runs from d0 at r = 0 to d_width at |r| ≥ width, symmetric in r, clamped to [1e-4, 0.9999]."""
    solimp = [[0.9, 0.95, 0.001, 0.5, 2]] * 4
    d = mujoco_soft.impedance([0, 1e-3, -2e-3, 5e-4], solimp)
    assert np.allclose(d, [0.9, 0.95, 0.95, 0.925])
    assert mujoco_soft.impedance([0], [[0, 1, 0.1, 0.5, 2]])[0] == 1e-4


def test_bad_inputs(go2_step):
    """Wrong shapes, NaN and contacts the step was not built for: one-line errors, nothing solved."""
    m = scene("go2", "elliptic")
    d = state(m, "go2", "standing")
    c = mujoco_contacts(m, d)
    R, B, Kr = soft_parameters(m, c, False)
    args = [d.qpos, d.qvel, d.qfrc_applied, c.frames, c.friction, c.dims, c.offsets, R, B, Kr]
    for i, bad in [(0, d.qpos[:-1]), (1, np.full(m.nv, np.nan)), (7, R[:-1]), (3, c.frames[:2]), (5, 2 + 0 * c.dims),
                   (6, c.offsets[:, :2])]:
        with pytest.raises(InputError):
            go2_step(*args[:i], bad, *args[i + 1:])
    with pytest.raises(InputError):
        go2_step(*args, pyramidal=True)        # 6 rows per contact given, 10 needed
    d.qpos[2] += 0.01
    d.qpos[7] += 0.3                           # one foot lifts: another contact set
    mujoco.mj_forward(m, d)
    with pytest.raises(ConstraintError):
        go2_step.solve(m, d)


def test_refuses_contacts_between_robot_bodies():
    """Two free boxes stacked on the floor: the box-box contact is not against the world; no contact at all neither."""
    m = mujoco.MjModel.from_xml_string("""<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      <body pos="0 0 .3"><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>""")
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.ncon > 4
    with pytest.raises(ConstraintError, match="robot body and the world"):
        mujoco_contacts(m, d)
    d.qpos[2], d.qpos[9] = 5.0, 6.0                # both in the air
    mujoco.mj_forward(m, d)
    with pytest.raises(ConstraintError, match="no active contact"):
        mujoco_contacts(m, d)


def _standing_args(cone="elliptic"):
    m = scene("go2", cone)
    d = state(m, "go2", "standing")
    c = mujoco_contacts(m, d)
    R, B, Kr = soft_parameters(m, c, cone == "pyramidal")
    return m, d, [d.qpos.copy(), d.qvel, d.qfrc_applied, c.frames.copy(), c.friction.copy(), c.dims, c.offsets, R.copy(),
                  B, Kr]


@pytest.mark.parametrize("scale", [1e160, 1e200, 1e300])
def test_a_huge_warm_start_is_no_converged_nan(go2_step, scale):
    """Issue 31, point 7: a warm start of 1e160 overflowed into NaN forces that max_abs skipped, so the status said
    converged with residuals 0.  Now either an honest "not finite" or forces that are MuJoCo's."""
    m, d, args = _standing_args()
    r = go2_step(*args, force_warm=np.full(d.nefc, scale))
    assert r.status in ("converged", "max iterations", "not finite")
    if r.status == "converged":
        assert np.all(np.isfinite(r.force)) and relative(r.force, d.efc_force) <= 1e-6
    else:
        assert r.status == "not finite"
    assert go2_step(*args).status == "converged"


@pytest.mark.parametrize("i, change, words", [
    (None, dict(tol=float("inf")), "tol"), (None, dict(tol=0.0), "tol"), (None, dict(tol=None), "tol"),
    (None, dict(max_iter=3e9), "max_iter"), (None, dict(max_iter=float("nan")), "max_iter"),
    (None, dict(rho=float("nan")), "rho"),
    (7, lambda R: 0 * R, "R"), (7, lambda R: -R, "R"),
    (3, lambda F: 0 * F, "orthonormal"), (3, lambda F: 2 * F, "orthonormal"),
    (4, lambda f: -f, "friction"), (4, lambda f: 0 * f, "friction"),
    (0, lambda q: np.r_[q[:3], 3 * q[3:7], q[7:]], "quaternion"), (0, lambda q: np.r_[q[:3], 0 * q[3:7], q[7:]], "quaternion"),
    (1, lambda v: np.ma.masked_array(v), "masked"),
])
def test_what_mujoco_would_not_take_is_refused(go2_step, i, change, words):
    """Issue 31, points 7, 8 and 16: tol = inf converged 7.6 N off; R <= 0, a zero or scaled frame, friction < 0 (read
    as |μ|) and a quaternion of norm 3 or 0 were accepted.  One-line InputErrors before any solve."""
    m, d, args = _standing_args()
    options = {}
    if i is None:
        options = change
    else:
        args[i] = change(args[i])
    with pytest.raises(InputError, match=words) as e:
        go2_step(*args, **options)
    assert "\n" not in str(e.value)


def test_the_step_takes_a_mujoco_model_only(tmp_path):
    """Issue 31, point 16: mujoco_contact_step(a Robot) ended in an AttributeError traceback."""
    from casadi_delassus.model import load_robot
    with pytest.raises(InputError, match="MjModel"):
        mujoco_contact_step(load_robot("go1"), ["FL_foot:6d-world"], out_dir=tmp_path)
    assert not any(tmp_path.rglob("*.so"))
