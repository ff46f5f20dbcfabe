"""MuJoCo's actuators over casadi.SX, for a joint transmission on a hinge or slide joint
(features.py refuses the rest; MuJoCo's computation chapter, "Actuation model"; the method of
engine_forward.c's mj_fwdActuation and engine_core_smooth.c's mj_transmission):

    length = gear · qpos,  velocity = gear · qvel,  moment = gear on the joint's dof
    u      = clamp(ctrl, ctrlrange)                        (ctrllimited, unless clampctrl is disabled)
    gain   = prm₀ (fixed) | prm₀ + prm₁ length + prm₂ velocity (affine)
    bias   = 0 (none)     | prm₀ + prm₁ length + prm₂ velocity (affine)
    force  = clamp(gain · u + bias, forcerange)            (forcelimited; 0 in a disabled group)
    qfrc_actuator = Σ moment · force, then clamped per joint to jnt_actfrcrange (actfrclimited)

All zero where ``disableflags`` has actuation."""
from __future__ import annotations

import casadi as ca

from ..model.mjcf import mujoco_module
from .flags import actuator_disabled, disabled


def _clamp(x, lo, hi):
    return ca.fmin(ca.fmax(x, float(lo)), float(hi))


def transmission(m, i):
    """(qpos address, dof address, gear) of actuator i's joint."""
    j = int(m.actuator_trnid[i, 0])
    return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), float(m.actuator_gear[i, 0])


def _affine(prm, length, velocity):
    return float(prm[0]) + float(prm[1]) * length + float(prm[2]) * velocity


def actuator_force(m, q, v, ctrl):
    """actuator_force (SX, nu) for qpos q, qvel v and ctrl (SX)."""
    mujoco = mujoco_module()
    out = []
    clamp_ctrl = not disabled(m, "clampctrl")
    for i in range(m.nu):
        a, d, gear = transmission(m, i)
        if disabled(m, "actuation") or actuator_disabled(m, i):
            out.append(ca.SX(0))
            continue
        length, velocity = gear * q[a], gear * v[d]
        u = _clamp(ctrl[i], *m.actuator_ctrlrange[i]) if clamp_ctrl and m.actuator_ctrllimited[i] else ctrl[i]
        fixed = int(m.actuator_gaintype[i]) == int(mujoco.mjtGain.mjGAIN_FIXED)
        gain = float(m.actuator_gainprm[i, 0]) if fixed else _affine(m.actuator_gainprm[i], length, velocity)
        force = gain * u
        if int(m.actuator_biastype[i]) == int(mujoco.mjtBias.mjBIAS_AFFINE):
            force = force + _affine(m.actuator_biasprm[i], length, velocity)
        out.append(_clamp(force, *m.actuator_forcerange[i]) if m.actuator_forcelimited[i] else force)
    return ca.vertcat(*out) if out else ca.SX(0, 1)


def qfrc_actuator(m, force):
    """qfrc_actuator (SX, nv) from actuator_force: the transmissions' moments, then the joints'
    actuator force ranges."""
    out = [ca.SX(0)] * m.nv
    if disabled(m, "actuation"):
        return ca.vertcat(*out)
    for i in range(m.nu):
        _, d, gear = transmission(m, i)
        out[d] = out[d] + gear * force[i]
    for j in range(m.njnt):
        if m.jnt_actfrclimited[j]:
            d = int(m.jnt_dofadr[j])
            out[d] = _clamp(out[d], *m.jnt_actfrcrange[j])
    return ca.vertcat(*out)


def velocity_derivative(m, q, v, ctrl):
    """∂qfrc_actuator/∂qvel's diagonal (SX list, nv): per actuator gear² (prm₂^gain · ctrl +
    prm₂^bias) of the affine gains and biases, as MuJoCo's mjd_actuator_vel forms it for
    implicitfast: with the raw (unclamped) ctrl, and nothing from an actuator whose force is at or
    beyond its forcerange."""
    mujoco = mujoco_module()
    out = [ca.SX(0)] * m.nv
    if disabled(m, "actuation"):
        return out
    force = actuator_force(m, q, v, ctrl)
    for i in range(m.nu):
        if actuator_disabled(m, i):
            continue
        _, d, gear = transmission(m, i)
        k = 0
        if int(m.actuator_gaintype[i]) == int(mujoco.mjtGain.mjGAIN_AFFINE):
            k = float(m.actuator_gainprm[i, 2]) * ctrl[i]
        if int(m.actuator_biastype[i]) == int(mujoco.mjtBias.mjBIAS_AFFINE):
            k = k + float(m.actuator_biasprm[i, 2])
        if m.actuator_forcelimited[i]:
            lo, hi = (float(x) for x in m.actuator_forcerange[i])
            k = ca.if_else(ca.logic_or(force[i] <= lo, force[i] >= hi), 0, k)
        out[d] = out[d] + gear * gear * k
    return out
