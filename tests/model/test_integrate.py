"""q ⊕ δ (model/integrate.py) against Pinocchio's ``integrate`` (free flyer, revolute,
prismatic, continuous, spherical), MuJoCo's ``mj_integratePos`` (free joint with its world-frame
linear velocity, ball, hinge; quaternions w, x, y, z) and a hand-written integrate; the tangent
map against finite differences of integrate; finite derivatives at δ = 0."""
from types import SimpleNamespace

import casadi as ca
import numpy as np
import pytest

from casadi_delassus.model import integrate as I

from conftest import model_for, rounding_tol

pin = pytest.importorskip("pinocchio")


def _aligned(ours, theirs, quaternions):
    """theirs with each quaternion's sign made ours' (q and −q are one rotation; Pinocchio keeps
    the hemisphere of the input, a step of more than π per axis may leave it)."""
    theirs = np.array(theirs, float)
    for sl in quaternions:
        if ours[sl] @ theirs[sl] < 0:
            theirs[sl] *= -1
    return theirs


@pytest.mark.parametrize("spec", ["go1", "talos", "tilted", "chain:n=4,floating=1"])
def test_integrate_is_pinocchios(spec):
    from casadi_delassus.verify.pinocchio_oracle import model_from_robot
    robot = model_for(spec)
    model = model_from_robot(robot)
    quats = [slice(b.q_index + 3, b.q_index + 7) for b in robot.bodies if b.joint.kind == "free"]
    rng = np.random.default_rng(1)
    worst = 0.0             # error / rounding_tol(|q| + |δ|): both round sums of that size
    for scale in (1e-9, 1e-5, 1e-3, 1e-2, 0.3, 2.0):       # both sides of the series' switch at θ = 1e-2
        for _ in range(10):
            q, d = robot.random_q(rng), rng.normal(size=robot.nv) * scale
            ours = I.integrate(robot, q, d)
            error = np.abs(ours - _aligned(ours, pin.integrate(model, q, d), quats)).max()
            worst = max(worst, error / rounding_tol(np.abs(q).max() + np.abs(d).max()))
    assert worst <= 1


def test_ball_joint_is_pinocchios_spherical():
    model = pin.Model()
    model.addJoint(0, pin.JointModelSpherical(), pin.SE3.Identity(), "ball")
    robot = SimpleNamespace(bodies=[SimpleNamespace(joint=SimpleNamespace(kind="ball"), q_index=0, v_index=0)], nq=4, nv=3)
    rng = np.random.default_rng(2)
    for scale in (1e-7, 1e-2, 1.0):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        d = rng.normal(size=3) * scale
        ours = I.integrate(robot, q, d)
        assert np.abs(ours - _aligned(ours, pin.integrate(model, q, d), [slice(0, 4)])).max() <= rounding_tol(1 + np.abs(d).max())


# -- MuJoCo's conventions ----------------------------------------------------------------------
MJCF = """<mujoco><worldbody>
  <body name="a"><freejoint name="free"/><geom size=".1"/>
    <body name="b" pos="0 0 .3"><joint name="ball" type="ball"/><geom size=".1"/>
      <body name="c" pos="0 0 .3"><joint name="hinge" type="hinge" axis="0 1 0"/><geom size=".1"/></body>
    </body>
  </body>
</worldbody></mujoco>"""
MUJOCO_ROBOT = SimpleNamespace(nq=12, nv=10, bodies=[
    SimpleNamespace(joint=SimpleNamespace(kind="free", quaternion="wxyz", velocity="mujoco"), q_index=0, v_index=0),
    SimpleNamespace(joint=SimpleNamespace(kind="ball", quaternion="wxyz"), q_index=7, v_index=6),
    SimpleNamespace(joint=SimpleNamespace(kind="revolute"), q_index=11, v_index=9)])


def _qmul_wxyz(a, b):
    w1, v1, w2, v2 = a[0], a[1:], b[0], b[1:]
    return np.r_[w1 * w2 - v1 @ v2, w1 * v2 + w2 * v1 + np.cross(v1, v2)]


def _rotvec_wxyz(w):
    angle = np.linalg.norm(w)
    if angle == 0:
        return np.array([1.0, 0, 0, 0])
    return np.r_[np.cos(angle / 2), np.sin(angle / 2) * w / angle]


def hand_integrate(qpos, qvel):
    """MuJoCo's documented integration, written out: a free joint's position moves by its
    world-frame linear velocity, its quaternion and a ball's turn by the angular velocity in
    the body frame (right product), a hinge adds."""
    q = np.array(qpos, float)
    q[:3] += qvel[:3]
    q[3:7] = _qmul_wxyz(q[3:7], _rotvec_wxyz(qvel[3:6]))
    q[7:11] = _qmul_wxyz(q[7:11], _rotvec_wxyz(qvel[6:9]))
    q[11] += qvel[9]
    return q


def _random_qpos(rng):
    q = rng.normal(size=12)
    q[3:7] /= np.linalg.norm(q[3:7])
    q[7:11] /= np.linalg.norm(q[7:11])
    return q


def test_mujoco_conventions_from_the_specification():
    rng = np.random.default_rng(3)
    for scale in (1e-8, 1e-2, 0.5):
        qpos, qvel = _random_qpos(rng), rng.normal(size=10) * scale
        assert np.abs(I.integrate(MUJOCO_ROBOT, qpos, qvel) - hand_integrate(qpos, qvel)).max() < 1e-15


def test_mujoco_conventions_are_mj_integratePos():
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(MJCF)
    assert (m.nq, m.nv) == (MUJOCO_ROBOT.nq, MUJOCO_ROBOT.nv)
    rng = np.random.default_rng(4)
    for scale in (1e-6, 1e-2, 0.5):
        qpos, qvel = _random_qpos(rng), rng.normal(size=10) * scale
        theirs = qpos.copy()
        mujoco.mj_integratePos(m, theirs, qvel, 1.0)
        ours = I.integrate(MUJOCO_ROBOT, qpos, qvel)
        assert np.abs(ours - _aligned(ours, theirs, [slice(3, 7), slice(7, 11)])).max() < 1e-14


# -- the tangent map -----------------------------------------------------------------------------
@pytest.mark.parametrize("robot", [model_for("tilted"), MUJOCO_ROBOT,
                                   SimpleNamespace(nq=11, nv=9, bodies=[  # Pinocchio layout with a ball
                                       SimpleNamespace(joint=SimpleNamespace(kind="free"), q_index=0, v_index=0),
                                       SimpleNamespace(joint=SimpleNamespace(kind="ball"), q_index=7, v_index=6)])],
                         ids=["tilted", "mujoco", "free+ball"])
def test_tangent_map_is_the_derivative_of_integrate(robot):
    rng = np.random.default_rng(5)
    unit = [slice(b.q_index + (3 if b.joint.kind == "free" else 0), b.q_index + (7 if b.joint.kind == "free" else 4))
            for b in robot.bodies if b.joint.kind in ("free", "ball")]
    unit += [slice(b.q_index, b.q_index + 2) for b in robot.bodies if b.joint.kind == "continuous"]
    for _ in range(5):
        q = rng.normal(size=robot.nq)
        for sl in unit:
            q[sl] /= np.linalg.norm(q[sl])
        h = 1e-6
        fd = np.column_stack([(I.integrate(robot, q, h * e) - I.integrate(robot, q, -h * e)) / (2 * h)
                              for e in np.eye(robot.nv)])
        # central differences round integrate's values (|q| ≤ 1 here) into errors of ε/h
        assert np.abs(I.tangent_map(robot, q) - fd).max() <= rounding_tol(np.abs(q).max() / h)


def test_derivatives_at_zero_are_finite():
    """CasADi differentiates q ⊕ δ at δ = 0 (the OCP example's first iterate): the series branch
    keeps both the value and the derivative finite, and equal to the tangent map."""
    robot = model_for("go1")
    q, d = ca.SX.sym("q", robot.nq), ca.SX.sym("d", robot.nv)
    J = ca.Function("J", [q, d], [ca.jacobian(I.integrate_sx(robot, q, d), d)])
    q0 = robot.random_q(np.random.default_rng(6))
    got = np.array(J(q0, np.zeros(robot.nv)))
    assert np.all(np.isfinite(got)) and np.abs(got - I.tangent_map(robot, q0)).max() < 1e-15
