"""How far any rollout can follow mujoco.rollout (issue 32, "done when" 1): MuJoCo against itself from initial
velocities changed by 1e-13, beside cd.mujoco_rollout against MuJoCo, on the same trajectories, step by step.

    .venv/bin/python bench/mujoco_chaos.py [--model ant] [--envs 8] [--steps 1000]

Both MuJoCo rollouts run Newton at 1e-15 (the problem's unique answer), as the accuracy tests do; the scenes,
starts (0-2 cm above the floor) and controls (sinusoids of half the control ranges) are bench/mujoco_rollout.py's.
Where MuJoCo's own trajectories part by more than the issue's bounds (qpos 1e-6, qvel 1e-5 relative) from a change
far below rounding's reach over a step, no implementation that is not MuJoCo's arithmetic bit for bit can stay
within them.  Writes bench/results/mujoco_chaos_<model>.md and .csv."""
from __future__ import annotations

import argparse

import numpy as np

from common import say, write
from mujoco_rollout import FULL, controls, scene, starts, tight

import mujoco  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

import casadi_delassus as cd  # noqa: E402

HORIZONS = (100, 200, 300, 400, 500, 600, 800, 1000)


def errors(m, a, b, k):
    """(qpos error, relative qvel error) of state arrays a and b over their first k steps, worst environment."""
    q, v = slice(1, 1 + m.nq), slice(1 + m.nq, 1 + m.nq + m.nv)
    dq = np.abs(a[:, :k, q] - b[:, :k, q]).max()
    dv = (np.abs(a[:, :k, v] - b[:, :k, v]) / np.maximum(1.0, np.abs(b[:, :k, v]))).max()
    return dq, dv


def first_past(m, a, b, bound=1e-6):
    """Per environment, the first step whose qpos differs by more than ``bound`` (None: none)."""
    q = slice(1, 1 + m.nq)
    past = np.abs(a[..., q] - b[..., q]).max(axis=2) > bound
    return [int(np.argmax(row)) if row.any() else None for row in past]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="ant", choices=("go2", "hopper", "walker2d_v5", "humanoid", "ant"))
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000)
    a = ap.parse_args()
    m = tight(scene(a.model))
    x0, u = starts(m, a.envs), controls(m, a.envs, a.steps)
    nudged = x0.copy()
    nudged[:, 1 + m.nq:1 + m.nq + m.nv] += 1e-13
    say("MuJoCo twice, then cd.mujoco_rollout (compiling on its first call) ...")
    ref, _ = mj_rollout.rollout(m, mujoco.MjData(m), x0, u)
    own, _ = mj_rollout.rollout(m, mujoco.MjData(m), nudged, u)
    ours, _ = cd.mujoco_rollout(m, mujoco.MjData(m), x0, u)
    rows = []
    for k in (h for h in HORIZONS if h <= a.steps):
        (mq, mv), (oq, ov) = errors(m, own, ref, k), errors(m, ours, ref, k)
        rows.append([k, f"{mq:.1e}", f"{mv:.1e}", f"{oq:.1e}", f"{ov:.1e}"])
    rows.append(["first step past 1e-6 in qpos, per environment", str(first_past(m, own, ref)), "",
                 str(first_past(m, ours, ref)), ""])
    write(f"mujoco_chaos_{a.model}", rows, ["steps", "MuJoCo nudged 1e-13: qpos", "qvel (relative)",
                                            "cd.mujoco_rollout: qpos", "qvel (relative)"],
          f"{a.model}: largest differences from mujoco.rollout over the first k steps, {a.envs} environments, "
          f"MuJoCo's Newton at 1e-15 (state size {mujoco.mj_stateSize(m, FULL)})")


if __name__ == "__main__":
    main()
