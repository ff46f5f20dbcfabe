"""Compiled MuJoCo rollouts side by side (issue 32 point 2): bench/mujoco_rollout.py's scenes (humanoid, ant, Go2:
16 environments x 500 steps from its starts under its controls) as built by this checkout and by others (PYTHONPATH
picks which package builds), the C entry point ``<name>_rollout`` called through ctypes on one thread, interleaved
in one process, so that before and after meet the same load.

    PYTHONPATH=/path/to/before .venv/bin/python bench/mujoco_ab.py build --out /tmp/mjab/before
    .venv/bin/python bench/mujoco_ab.py build --out /tmp/mjab/after
    taskset -c 0 .venv/bin/python bench/mujoco_ab.py time /tmp/mjab/before /tmp/mjab/after [--copies 2] [--reps 9]

``time`` loads each build's .so from ``--copies`` copies (as bench/rollout_ab.py: the same code runs up to 5 % apart
from another load address), checks each build's states against the first folder's (bit for bit, or the largest
differences of qpos and qvel), then per round times ``--calls`` rollouts of every copy in this thread's CPU time,
the folders in turn, their order reversed every other round; per model and folder the median µs per step of its
copies' medians with the spread (least, largest) of its repetitions, and the first folder's over it.
``CD_AB_MODELS`` (comma-separated) picks the models."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

# the package first, from PYTHONPATH (as bench/rollout_ab.py)
from casadi_delassus.codegen.mujoco_rollout import build as build_rollout
from casadi_delassus.mujoco_model.model import MujocoModel
from casadi_delassus.mujoco_model.rollout_parts import rollout_parts

import ab  # bench/: this script's folder, first on sys.path
from mujoco_rollout import controls, scene, starts

MODELS = os.environ.get("CD_AB_MODELS", "humanoid,ant,go2").split(",")
ENVS, STEPS = 16, 500
DOUBLE_P = ctypes.POINTER(ctypes.c_double)


def build(out):
    """Build every model's rollout with the package on sys.path and copy its .so and manifest to ``out``."""
    Path(out).mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        manifest = Path(build_rollout(MujocoModel(scene(name)), rollout_parts, "codegen_out"))
        for suffix in (".so", ".json"):
            shutil.copy(manifest.with_suffix(suffix), Path(out) / f"{name}{suffix}")
        print(f"{name}: {manifest} -> {out}")


class Call:
    """One copy's ``<name>_rollout`` on model ``name``'s bench batch, one thread, and its states."""

    def __init__(self, so, manifest, name):
        info = json.loads(Path(manifest).read_text())
        self.fn = getattr(ctypes.CDLL(str(so)), info["function"] + "_rollout")
        self.fn.argtypes, self.fn.restype = [DOUBLE_P] * 8, ctypes.c_int
        m = scene(name)
        x0, u = starts(m, ENVS), controls(m, ENVS, STEPS)
        self.state0 = np.ascontiguousarray(x0[:, :1 + m.nq + m.nv])
        self.control = np.ascontiguousarray(u)
        self.dims = np.array([ENVS, STEPS, 1, u.shape[2], 0.0])
        self.state = np.empty((ENVS, STEPS, self.state0.shape[1]))
        self.sens = np.empty((ENVS, STEPS, int(info["nsensordata"])))
        self.status = np.zeros(ENVS)
        self.nq = m.nq

    def __call__(self):
        p = lambda a: a.ctypes.data_as(DOUBLE_P)        # noqa: E731
        self.fn(p(self.dims), p(self.state0), None, p(self.control), p(self.state), p(self.sens), p(self.status), None)


def compare(c, first):
    """'bit for bit' or the largest |Δqpos|, |Δqvel| of Call ``c``'s states against ``first``'s."""
    if np.array_equal(c.state, first.state):
        return "bit for bit"
    d = np.abs(c.state - first.state)
    return f"|dqpos| {d[..., 1:1 + c.nq].max():.2g}, |dqvel| {d[..., 1 + c.nq:].max():.2g}"


def time_builds(folders, copies, reps, calls, tmp):
    """Markdown lines per model: each folder's states against the first's, then its µs per step (median of its
    copies' medians, least and largest of all its repetitions) and the first's over it."""
    lines = []
    for name in MODELS:
        fns = {}
        for i, folder in enumerate(folders):
            for c in range(copies):
                so = Path(tmp) / f"{name}_build{i}_copy{c}.so"
                shutil.copy(Path(folder) / f"{name}.so", so)
                fns[i, c] = Call(so, Path(folder) / f"{name}.json", name)
        for fn in fns.values():
            fn()
        lines += [f"- {name} {folder}: states against the first's: {compare(fns[i, 0], fns[0, 0])}"
                  for i, folder in enumerate(folders)]
        us = {k: [] for k in fns}
        for r in range(reps):
            for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                t0 = time.thread_time()
                for _ in range(calls):
                    fns[k]()
                us[k].append((time.thread_time() - t0) / calls / (ENVS * STEPS) * 1e6)
        per = {i: [statistics.median(us[i, c]) for c in range(copies)] for i in range(len(folders))}
        base = statistics.median(per[0])
        for i, folder in enumerate(folders):
            every = [x for c in range(copies) for x in us[i, c]]
            lines.append(f"- {name} {folder}: {statistics.median(per[i]):.2f} µs a step (copies "
                         f"{', '.join(f'{x:.2f}' for x in per[i])}; least {min(every):.2f}, largest {max(every):.2f}), "
                         f"{base / statistics.median(per[i]):.3f}x the first")
    return lines


if __name__ == "__main__":
    ab.main(__doc__, build, time_builds, "{reps} rounds, {copies} copies, {calls} calls a round", copies=2, reps=9,
            calls=1, tmp="/tmp/mujoco_ab")
