"""A rollout (simulation/simulate.py) as a CSV table and a matplotlib figure.

CSV: one row per step k, the state (q_k, v_k) it started from (columns named by joint: _columns), the torque τ_k it applied, the
candidates' gaps and contact forces λ/dt ([t₁, t₂, n] of the contact frame, N), the solver's
iterations and largest residual, and the step's status.  Files are written to a temporary
name and renamed, so an interrupted write leaves nothing half-written; a write that fails (a full
disk, a folder that is not writable) and a missing matplotlib are one-line OutputErrors.
"""
from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

import numpy as np

from ..errors import OutputError


def candidate_label(robot, c):
    """``link@x,y,z`` (the offset in the link's frame, as a user writes it; ``/r`` for a sphere): four points on one
    link stay apart in the CSV header and the figure's legend."""
    f = robot.frame(c.link)
    offset = ",".join(f"{x:.6g}" for x in f.rotation.T @ (c.point - f.translation) + 0.0)     # + 0.0: no "-0"
    return f"{c.link}@{offset}" + (f"/{c.radius:g}" if c.radius else "")


def _columns(rollout):
    """The CSV header: q and v entries by joint (Robot.coordinate_names: a free base's ``x y z qx qy qz qw``),
    velocities ``v_<name>``, torques ``tau_<name>``, and each candidate's gap and force ``c<i>:<link@offset>.fn``."""
    robot = rollout.scene.robot
    qn, vn = robot.coordinate_names()
    names = [f"c{i}:{candidate_label(robot, c)}" for i, c in enumerate(rollout.scene.candidates)]
    return (["t", "status", "iterations", "residual"] + qn + [f"v_{n}" for n in vn] + [f"tau_{n}" for n in vn]
            + [f"{n}.{x}" for n in names for x in ("gap", "ft1", "ft2", "fn")])


def _rows(rollout):
    """The CSV rows, one per step."""
    for k, status in enumerate(rollout.statuses):
        per = np.column_stack([rollout.gaps[k], rollout.forces[k]]).reshape(-1)
        yield ([f"{rollout.t[k]:.9g}", status, int(rollout.iterations[k]), f"{rollout.residuals[k]:.3e}"]
               + [repr(float(x)) for x in np.concatenate([rollout.q[k], rollout.v[k], rollout.tau[k], per])])


def write_atomic(path, write, mode="w"):
    """Call write(file) on a temporary file beside ``path`` and rename it onto ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, mode, **({"newline": ""} if "b" not in mode else {})) as f:
            write(f)
        os.replace(tmp, path)
    except OSError as exc:          # ENOSPC, EDQUOT, EIO: the temporary file goes, the old file (if any) stays
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_csv(rollout, path):
    """The rollout as CSV at ``path``; returns the path."""
    def write(f):
        w = csv.writer(f)
        w.writerow(_columns(rollout))
        w.writerows(_rows(rollout))
    return write_atomic(path, write)


def plot(rollout, path, title=None):
    """A figure (PNG or any matplotlib format by suffix): base height, joint angles and normal
    forces per contact over time; returns the path."""
    plt = pyplot()
    robot = rollout.scene.robot
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    tq = rollout.dt * np.arange(len(rollout.q))
    h = rollout.base_height()
    axes[0].plot(tq, h if h is not None else np.full(len(tq), np.nan))
    axes[0].set_ylabel("base height (m)")
    joints = [b for b in robot.bodies if b.joint.kind in ("revolute", "prismatic")]
    for b in joints:
        axes[1].plot(tq, rollout.q[:, b.q_index], lw=0.8, label=b.joint.name)
    axes[1].set_ylabel("joint positions (rad, m)")
    for i, c in enumerate(rollout.scene.candidates):
        axes[2].plot(rollout.t, rollout.forces[:, i, 2], lw=0.8, label=candidate_label(robot, c))
    axes[2].set_ylabel("normal force (N)")
    axes[2].set_xlabel("time (s)")
    for ax, n in ((axes[1], len(joints)), (axes[2], len(rollout.scene.candidates))):
        side_legend(ax, n)
    fig.suptitle(title or f"{robot.name}: {len(rollout.statuses)} steps of {rollout.dt:g} s, {rollout.status}")
    return save_figure(plt, fig, path)


def pyplot():
    """matplotlib.pyplot on the Agg backend, or a one-line OutputError when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        raise OutputError("no figure: matplotlib is not installed (pip install 'casadi_delassus[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def side_legend(ax, n):
    """The legend of a panel of ``n`` lines beside it, in columns of up to 16 names (a humanoid's 29 joints: two)."""
    if n:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=-(-n // 16), borderaxespad=0)


def save_figure(plt, fig, path):
    """``fig`` written atomically at ``path`` in the format its suffix names (PNG by default), then closed."""
    fig.tight_layout()
    try:
        return write_atomic(path, lambda f: fig.savefig(f, format=Path(path).suffix.lstrip(".") or "png"), mode="wb")
    finally:
        plt.close(fig)
