"""``casadi-delassus simulate model.xml``: an MJCF model stepped by ``cd.mujoco_rollout`` (mujoco/rollout.py) with the
physics its file states — time step, integrator, actuators, joint limits and friction loss, contacts between its geoms
and its floor — under constant actuator controls, and its trajectory as a CSV table and a figure (issue 32).

The contact step of simulation/ takes Pinocchio's q layout and hand-listed contact points; an MJCF model needs neither:
its contacts, solver settings and actuators are MuJoCo's, compiled per model by cd.mujoco_rollout.
"""
from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..model.mjcf import compile_mjcf, mujoco_module
from ..names import shown
from ..simulation.simulate import step_count
from ..simulation.rollout_io import pyplot, save_figure, side_legend, write_atomic
from .rollout import DEFAULT_OUT, mujoco_rollout


@dataclass
class ModelTrajectory:
    """One MJCF rollout: qpos (n+1 x nq) and qvel (n+1 x nv) from the initial state on, the constant ``ctrl`` (nu),
    sensordata (n x nsensordata, as mujoco.rollout records it), and the columns' names."""
    name: str
    dt: float
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    sensordata: np.ndarray
    diverged: bool
    qpos_names: list
    qvel_names: list
    ctrl_names: list
    sensor_names: list

    @property
    def status(self) -> str:
        """"ok", or "diverged" when MuJoCo's rule (a NaN or a value beyond 1e10) stopped the trajectory."""
        return "diverged" if self.diverged else "ok"


def _object_name(mujoco, m, kind, i, fallback):
    """The name of object ``i`` of ``kind`` (mjtObj), or ``fallback<i>`` for an unnamed one."""
    return mujoco.mj_id2name(m, kind, i) or f"{fallback}{i}"


def coordinate_names(mujoco, m):
    """(qpos names, qvel names) by joint, MuJoCo's order: a free joint's ``name.x y z qw qx qy qz`` and
    ``name.vx vy vz wx wy wz`` (world-frame linear velocity), a ball's ``name.qw qx qy qz`` and ``name.wx wy wz``."""
    parts = {int(mujoco.mjtJoint.mjJNT_FREE): (("x", "y", "z", "qw", "qx", "qy", "qz"), ("vx", "vy", "vz", "wx", "wy", "wz")),
             int(mujoco.mjtJoint.mjJNT_BALL): (("qw", "qx", "qy", "qz"), ("wx", "wy", "wz"))}
    qn, vn = [], []
    for j in range(m.njnt):
        name = _object_name(mujoco, m, mujoco.mjtObj.mjOBJ_JOINT, j, "joint")
        qs, vs = parts.get(int(m.jnt_type[j]), ((None,), (None,)))
        qn += [name if s is None else f"{name}.{s}" for s in qs]
        vn += [name if s is None else f"{name}.{s}" for s in vs]
    return qn, vn


def sensor_names(mujoco, m):
    """One name per sensordata entry: the sensor's name, ``.k`` for each entry of a sensor of several."""
    names = []
    for s in range(m.nsensor):
        name = _object_name(mujoco, m, mujoco.mjtObj.mjOBJ_SENSOR, s, "sensor")
        dim = int(m.sensor_dim[s])
        names += [name] if dim == 1 else [f"{name}.{k}" for k in range(dim)]
    return names


def _initial_data(mujoco, m, qpos, keyframe):
    """MjData at the model's qpos0, at ``keyframe`` (a name or an index), and then at ``qpos`` when given."""
    d = mujoco.MjData(m)
    if keyframe is not None:
        k = int(keyframe) if str(keyframe).isdigit() else mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, str(keyframe))
        if not 0 <= k < m.nkey:
            raise InputError(f"unknown keyframe {shown(keyframe)} of the model ({m.nkey} keyframes)")
        mujoco.mj_resetDataKeyframe(m, d, k)
    if qpos is not None:
        qpos = np.asarray(qpos, dtype=float)
        if qpos.shape != (m.nq,) or not np.all(np.isfinite(qpos)):
            raise InputError(f"--q0 must be {m.nq} finite numbers (the model's nq), got {qpos.size}")
        d.qpos[:] = qpos
    return d


def simulate_model(model, duration, ctrl=None, qpos=None, keyframe=None, out_dir=DEFAULT_OUT, cc=None):
    """The ModelTrajectory of the MJCF file ``model`` (a path) over ``duration`` seconds at its own time step,
    from its qpos0, ``keyframe`` or ``qpos`` at rest, under the constant controls ``ctrl`` (nu numbers; default 0)."""
    mujoco = mujoco_module()
    m = compile_mjcf(path=Path(model))
    n = step_count(duration, float(m.opt.timestep), 8 * (1 + m.nq + m.nv + m.nsensordata))  # states and sensors
    u = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, dtype=float)
    if u.shape != (m.nu,) or not np.all(np.isfinite(u)):
        raise InputError(f"--ctrl must be {m.nu} finite numbers (the model's actuators), got {u.size}")
    d = _initial_data(mujoco, m, qpos, keyframe)
    state0 = np.empty(mujoco.mj_stateSize(m, int(mujoco.mjtState.mjSTATE_FULLPHYSICS)))
    mujoco.mj_getState(m, d, state0, int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", RuntimeWarning)
        state, sens = mujoco_rollout(m, d, state0[None], np.broadcast_to(u, (1, n, m.nu)), nstep=n, out_dir=out_dir,
                                     cc=cc)
    qpos_t = np.vstack([state0[1:1 + m.nq], state[0, :, 1:1 + m.nq]])
    qvel_t = np.vstack([state0[1 + m.nq:1 + m.nq + m.nv], state[0, :, 1 + m.nq:1 + m.nq + m.nv]])
    qn, vn = coordinate_names(mujoco, m)
    actuators = [_object_name(mujoco, m, mujoco.mjtObj.mjOBJ_ACTUATOR, a, "actuator") for a in range(m.nu)]
    name = Path(model).stem
    return ModelTrajectory(name, float(m.opt.timestep), qpos_t, qvel_t, u, sens[0], any("diverged" in str(w.message)
                           for w in said), qn, vn, actuators, sensor_names(mujoco, m))


def write_csv(traj, path):
    """The trajectory as CSV at ``path`` (one row per step: the state it started from, the controls, the sensors
    mujoco.rollout recorded for it); returns the path."""
    header = (["t"] + traj.qpos_names + [f"v_{n}" for n in traj.qvel_names] + [f"ctrl_{n}" for n in traj.ctrl_names]
              + [f"sensor_{n}" for n in traj.sensor_names])

    def write(f):
        w = csv.writer(f)
        w.writerow(header)
        for k in range(len(traj.sensordata)):
            w.writerow([f"{k * traj.dt:.9g}"] + [repr(float(x)) for x in np.concatenate(
                [traj.qpos[k], traj.qvel[k], traj.ctrl, traj.sensordata[k]])])
    return write_atomic(path, write)


def plot(traj, path):
    """A figure: the first free joint's height, the hinge and slide positions and their velocities over time."""
    plt = pyplot()
    t = traj.dt * np.arange(len(traj.qpos))
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    height = next((i for i, n in enumerate(traj.qpos_names) if n.endswith(".z")), None)
    axes[0].plot(t, traj.qpos[:, height] if height is not None else np.full(len(t), np.nan))
    axes[0].set_ylabel("free body height (m)")
    scalar_q = [i for i, n in enumerate(traj.qpos_names) if "." not in n]
    scalar_v = [i for i, n in enumerate(traj.qvel_names) if "." not in n]
    for ax, x, columns, names in ((axes[1], traj.qpos, scalar_q, traj.qpos_names),
                                  (axes[2], traj.qvel, scalar_v, traj.qvel_names)):
        for i in columns:
            ax.plot(t, x[:, i], lw=0.8, label=names[i])
        side_legend(ax, len(columns))
    axes[1].set_ylabel("joint positions (rad, m)")
    axes[2].set_ylabel("joint velocities (rad/s, m/s)")
    axes[2].set_xlabel("time (s)")
    fig.suptitle(f"{traj.name}: {len(traj.sensordata)} steps of {traj.dt:g} s, {traj.status}")
    return save_figure(plt, fig, path)
