"""A rollout (simulation/simulate.py) as a CSV table and a matplotlib figure.

CSV: one row per step k, the state (q_k, v_k) it started from, the torque τ_k it applied, the
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


def _columns(rollout):
    """The CSV header: names of q, v, τ entries and of each candidate's gap and force."""
    robot = rollout.scene.robot
    names = [f"c{i}_{c.link}" for i, c in enumerate(rollout.scene.candidates)]
    return (["t", "status", "iterations", "residual"] + [f"q{i}" for i in range(robot.nq)]
            + [f"v{i}" for i in range(robot.nv)] + [f"tau{i}" for i in range(robot.nv)]
            + [f"{n}.{x}" for n in names for x in ("gap", "ft1", "ft2", "fn")])


def _rows(rollout):
    """The CSV rows, one per step."""
    for k, status in enumerate(rollout.statuses):
        per = np.column_stack([rollout.gaps[k], rollout.forces[k]]).reshape(-1)
        yield ([f"{rollout.t[k]:.9g}", status, int(rollout.iterations[k]), f"{rollout.residuals[k]:.3e}"]
               + [repr(float(x)) for x in np.concatenate([rollout.q[k], rollout.v[k], rollout.tau[k], per])])


def _atomic(path, write, mode="w"):
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
    return _atomic(path, write)


def plot(rollout, path, title=None):
    """A figure (PNG or any matplotlib format by suffix): base height, joint angles and normal
    forces per contact over time; returns the path."""
    try:
        import matplotlib
    except ImportError:
        raise OutputError("no figure: matplotlib is not installed (pip install 'casadi_delassus[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    robot = rollout.scene.robot
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    tq = rollout.dt * np.arange(len(rollout.q))
    h = rollout.base_height()
    axes[0].plot(tq, h if h is not None else np.full(len(tq), np.nan))
    axes[0].set_ylabel("base height (m)")
    for b in robot.bodies:
        if b.joint.kind in ("revolute", "prismatic"):
            axes[1].plot(tq, rollout.q[:, b.q_index], lw=0.8)
    axes[1].set_ylabel("joint positions (rad, m)")
    for i, c in enumerate(rollout.scene.candidates):
        axes[2].plot(rollout.t, rollout.forces[:, i, 2], lw=0.8, label=f"{i}: {c.link}")
    axes[2].set_ylabel("normal force (N)")
    axes[2].set_xlabel("time (s)")
    if len(rollout.scene.candidates) <= 8:
        axes[2].legend(fontsize=7)
    fig.suptitle(title or f"{robot.name}: {len(rollout.statuses)} steps of {rollout.dt:g} s, {rollout.status}")
    fig.tight_layout()
    try:
        return _atomic(path, lambda f: fig.savefig(f, format=Path(path).suffix.lstrip(".") or "png"), mode="wb")
    finally:
        plt.close(fig)
