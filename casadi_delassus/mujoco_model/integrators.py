"""MuJoCo's time steps on the NumPy forward (forward.py), the reference the C assembler mirrors
(MuJoCo's computation chapter, "Numerical integration"; the method of engine_forward.c's
mj_step, mj_EulerSkip, mj_implicitSkip, mj_RungeKutta and mj_advance, written anew).

One step from (time t, qpos, qvel) under (ctrl, qfrc_applied), h = opt.timestep:

- forward at the state: qacc, qfrc_smooth, qfrc_constraint, M (collision at qpos included);
- Euler: where some dof has damping b > 0 (and neither eulerdamp nor damper is disabled), the
  damping is implicit: qacc ← (M + h diag(b))⁻¹ (qfrc_smooth + qfrc_constraint); else qacc as is;
- implicitfast: qacc ← (M − h D)⁻¹ (qfrc_smooth + qfrc_constraint), D = ∂(qfrc_passive +
  qfrc_actuator)/∂qvel without the RNE's terms: −diag(b) (unless damper is disabled) and the
  actuators' gear² (prm₂^gain ctrl + prm₂^bias), none where the force is clamped by its
  forcerange (actuators.velocity_derivative);
- then (mj_advance) qvel ← qvel + h qacc, qpos ← qpos ⊕ h qvel (the new qvel), t ← t + h, and
  qacc_warmstart ← the forward's qacc (not the implicit one);
- RK4 (A = [½; 0 ½; 0 0 1], b = (⅙, ⅓, ⅓, ⅙), c = (½, ½, 1)), Munthe-Kaas on the rotations:
  stage 1 is the forward at the state, k₁ = qvel; stage i = 2..4 is a full forward (its own
  contacts and solve) at Xᵢ = (qpos ⊕ h Σⱼ Aᵢⱼ kⱼ, qvel + h Σⱼ Aᵢⱼ aⱼ, t + cᵢ h), and kᵢ is
  Xᵢ's qvel with each ball's and free joint's angular velocity ω made dexp⁻¹(θ)ω (the exact
  closed form), θ = h Σⱼ Aᵢⱼ kⱼ on that joint (``lie_correction``); then
  qpos ← qpos ⊕ h Σ bⱼ kⱼ, qvel ← qvel + h Σ bⱼ aⱼ, t ← t + h, and qacc_warmstart ← stage 4's
  qacc.  Every stage starts its solve from the same qacc_warmstart (the step's), as MuJoCo's do;
  the compiled rollout starts stages 2-3 from the stage before's qacc and stage 4 from
  2 A₂ − A₀ instead (nearer in time; the solve's answer is the same to its tolerance:
  templates/mujoco_rollout.c.j2).  MuJoCo 4.0's
  mj_step is this, not the plain weighted sum of the stages' qvel (docs/mujoco_model.md has the
  measured differences).

qpos ⊕ δ (mj_integratePos): hinge and slide q + δ; ball and free quaternions normalized, then
multiplied on the right by the rotation of angle ‖ω‖ about ω/‖ω‖ (ω the rotational part of δ,
no normalization after); a free joint's position p + δ_lin.

What ``mujoco.rollout.rollout`` (MuJoCo 4.0, python/mujoco/rollout.cc) records, per trajectory:
it sets the initial state (mj_setState, mjSTATE_FULLPHYSICS) and qacc_warmstart (the given one,
else zeros), clears ctrl, qfrc_applied and xfrc_applied where control_spec does not set them and
resets eq_active to eq_active0 (mocap to the model's); then per step t it sets control[t]
(mj_setState with control_spec), calls mj_step, and records state[t] = mj_getState(FULLPHYSICS)
after the step — time, qpos, qvel, act, then history, plugin and plastic state (empty for the
models features.py accepts): [t + h, qpos, qvel] — and sensordata[t] = d.sensordata after the
step, which mj_step's first mj_forward computed at the state *before* the step (the RK4 stages
skip sensors), with that forward's qacc and efc_force for accelerometer and touch.  Once a
MuJoCo warning is raised (a bad qpos, qvel or qacc reset the data), the remaining rows of that
trajectory repeat the state and sensordata of the moment the warning was seen.
``step`` below returns the sensors' inputs the same way: the forward at the pre-step state."""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from . import actuators
from .flags import disabled
from .forward import ForwardModel
from .kinematics import BALL, FREE

RK4_A = ((0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)


@dataclass
class State:
    """The integrated state (mjSTATE_FULLPHYSICS for the accepted models) and the warm start."""
    time: float
    qpos: np.ndarray
    qvel: np.ndarray
    qacc_warmstart: np.ndarray

    def full_physics(self):
        """[time, qpos, qvel] as mj_getState(mjSTATE_FULLPHYSICS) lays it out (no act, history, plugin or plastic state)."""
        return np.concatenate([[self.time], self.qpos, self.qvel])


def integrate_pos(m, qpos, delta, h):
    """qpos ⊕ h δ as mj_integratePos computes it (module docstring)."""
    q = np.array(qpos, float)
    for j in range(m.njnt):
        a, d, kind = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), int(m.jnt_type[j])
        if kind == FREE:
            q[a:a + 3] += h * np.asarray(delta[d:d + 3])
            a, d = a + 3, d + 3
        if kind in (FREE, BALL):
            q[a:a + 4] = _quat_integrate(q[a:a + 4], np.asarray(delta[d:d + 3], float), h)
        else:
            q[a] += h * delta[d]
    return q


def lie_correction(m, theta, v):
    """A stage's position increment per unit time for RK4 on the rotation group (Munthe-Kaas):
    v, with every ball's and free joint's angular velocity ω replaced by dexp⁻¹(θ) ω =
    ω + ½ θ × ω + c(‖θ‖) θ × (θ × ω), c(x) = (1 − (x/2) cot(x/2))/x² (1/12 + x²/720 near 0),
    θ = that joint's rotation from the step's start to the stage."""
    k = np.array(v, float)
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (FREE, BALL):
            r = int(m.jnt_dofadr[j]) + (3 if int(m.jnt_type[j]) == FREE else 0)
            t, w = theta[r:r + 3], k[r:r + 3].copy()
            n = np.linalg.norm(t)
            c = (1 - 0.5 * n / np.tan(0.5 * n)) / (n * n) if n > 1e-4 else 1 / 12 + n * n / 720
            k[r:r + 3] = w + 0.5 * np.cross(t, w) + c * np.cross(t, np.cross(t, w))
    return k


def _quat_integrate(quat, w, h):
    """normalize(quat) ⊗ (cos(θ/2), sin(θ/2) ω/‖ω‖), θ = h ‖ω‖."""
    n = np.linalg.norm(w)
    axis = w / n if n >= 1e-15 else np.array([1.0, 0.0, 0.0])
    half = 0.5 * h * n
    r = np.concatenate([[np.cos(half)], np.sin(half) * axis])
    q = quat / np.linalg.norm(quat)
    return np.concatenate([[q[0] * r[0] - q[1:] @ r[1:]], q[0] * r[1:] + r[0] * q[1:] + np.cross(q[1:], r[1:])])


class Integrator:
    """MuJoCo's step for a ForwardModel, ``contacts(qpos)`` giving each forward's contacts."""

    def __init__(self, forward_model: ForwardModel, contacts):
        self.fm, self.m, self.contacts = forward_model, forward_model.m, contacts
        m = self.m
        self.kind = {0: "euler", 1: "rk4", 3: "implicitfast"}[int(m.opt.integrator)]
        q, v, u = ca.SX.sym("q", m.nq), ca.SX.sym("v", m.nv), ca.SX.sym("u", m.nu)
        self._actuator_damping = ca.Function("dv", [q, v, u], [ca.vertcat(*actuators.velocity_derivative(m, q, v, u))])

    def forward(self, state, ctrl, qfrc_applied, qpos=None, qvel=None):
        """The Forward at (qpos, qvel) (default: the state's), warm-started from the state."""
        qpos = state.qpos if qpos is None else qpos
        qvel = state.qvel if qvel is None else qvel
        return self.fm.forward(qpos, qvel, ctrl, qfrc_applied, self.contacts(qpos), qacc_warm=state.qacc_warmstart)

    def step(self, state, ctrl=None, qfrc_applied=None):
        """(the next State, the Forward at ``state``: what sensordata is computed from)."""
        m = self.m
        ctrl = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, float)
        f = self.forward(state, ctrl, qfrc_applied)
        if self.kind == "rk4":
            return self._rk4(state, f, ctrl, qfrc_applied), f
        qacc = self._implicit_acceleration(state, f, ctrl)
        h = m.opt.timestep
        qvel = state.qvel + h * qacc
        return State(state.time + h, integrate_pos(m, state.qpos, qvel, h), qvel, f.qacc), f

    def _implicit_acceleration(self, state, f, ctrl):
        """Euler's or implicitfast's qacc (module docstring)."""
        m, h = self.m, self.m.opt.timestep
        damping = np.zeros(m.nv) if disabled(m, "damper") else np.array(m.dof_damping, float)
        if self.kind == "euler":
            if disabled(m, "eulerdamp") or not np.any(damping > 0):
                return f.qacc
            H = f.M + h * np.diag(damping)
        else:
            D = -np.diag(damping) + np.diag(np.array(self._actuator_damping(state.qpos, state.qvel, ctrl)).ravel())
            H = f.M - h * D
        return np.linalg.solve(H, f.qfrc_smooth + f.qfrc_constraint)

    def _rk4(self, state, f1, ctrl, qfrc_applied):
        m, h = self.m, self.m.opt.timestep
        steps, acc = [state.qvel], [f1.qacc]
        f = f1
        for row in RK4_A:
            dq = sum(a * k for a, k in zip(row, steps))
            dv = sum(a * x for a, x in zip(row, acc))
            qvel = state.qvel + h * dv
            f = self.forward(state, ctrl, qfrc_applied, integrate_pos(m, state.qpos, dq, h), qvel)
            steps.append(lie_correction(m, h * dq, qvel))
            acc.append(f.qacc)
        dq = sum(b * k for b, k in zip(RK4_B, steps))
        dv = sum(b * x for b, x in zip(RK4_B, acc))
        return State(state.time + h, integrate_pos(m, state.qpos, dq, h), state.qvel + h * dv, f.qacc)

    def rollout(self, state, controls, qfrc_applied=None):
        """(states (nstep x (1 + nq + nv)), the pre-step Forwards), as mujoco.rollout records them."""
        states, forwards = [], []
        for t, u in enumerate(controls):
            state, f = self.step(state, u, None if qfrc_applied is None else qfrc_applied[t])
            states.append(state.full_physics())
            forwards.append(f)
        return np.array(states), forwards

