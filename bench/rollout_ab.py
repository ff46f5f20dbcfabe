"""Compiled rollouts side by side (issue 33 point 4): the go1 standing rollout under the joint PD (bench/simulate.py's
rollout-speed scene: PGS to 1e-8, 1,000 steps of 1 ms) as built by this checkout and by others (PYTHONPATH picks which
package builds), its C entry point ``<name>_rollout_batch`` called through ctypes on one environment, interleaved in
one process, so that before and after meet the same load.

    PYTHONPATH=/path/to/main .venv/bin/python bench/rollout_ab.py build --out /tmp/ab/before
    .venv/bin/python bench/rollout_ab.py build --out /tmp/ab/after
    taskset -c 0 .venv/bin/python bench/rollout_ab.py time /tmp/ab/before /tmp/ab/after [--copies 3] [--reps 7]

``time`` loads each build's .so from ``--copies`` copies (the same code runs up to 5 % faster or slower from another
load address: measured on this host with two copies of one file), checks each build's records against the first
folder's (bit for bit, or the largest differences of q and v), then times ``--calls`` rollouts of every copy in turn
per round, ``--reps`` rounds, in this thread's CPU time; per folder the median ns per step of its copies' medians
(each copy's), and the ratio to the first folder.  The records are this checkout's arrays (runtime/contact_rollout.py
LoadedRollout's arguments, captured): no Python around the C, no fresh pages."""
from __future__ import annotations

import ctypes
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# the package first, from PYTHONPATH: bench/simulate.py's common.py then puts this checkout on sys.path too late to
# replace it
import casadi_delassus as cd
from casadi_delassus.runtime import contact_rollout
from casadi_delassus.simulation import simulate as sim

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate import DT, KD, KP, go1_scene  # noqa: E402
import ab  # noqa: E402

STEPS, SOLVER, TOL = 1000, "pgs", 1e-8


def scene_and_factory():
    """(go1_stand's problem, the scene, its PD, the compiled step factory) of rollout-speed."""
    p, robot, scene = go1_scene()
    return p, scene, cd.pd_controller(robot, p.q, KP, KD), sim.factory("compiled", SOLVER, TOL, STEPS)


def build(out):
    """Build the rollout with the package on sys.path and copy its .so and manifest to ``out``."""
    p, scene, pd, factory = scene_and_factory()
    sim.run(scene, p.q, np.zeros(scene.robot.nv), DT, DT, pd, factory)
    so = Path(factory.rollout(scene, p.q).so)
    Path(out).mkdir(parents=True, exist_ok=True)
    for suffix in (".so", ".json"):
        shutil.copy(so.with_suffix(suffix), Path(out) / f"rollout{suffix}")
    print(f"{cd.__file__}: {so} -> {out}")


def entry(so, manifest, like):
    """``<name>_rollout_batch`` of the .so at ``so`` with the argument types of ``like``."""
    fn = getattr(ctypes.CDLL(str(so)), json.loads(Path(manifest).read_text())["function"] + "_rollout_batch")
    fn.argtypes, fn.restype = like.argtypes, like.restype
    return fn


def captured_call(scene, p, pd, factory):
    """The arguments this checkout's rollout hands its C entry point (one call: 1,000 steps are one part), and the
    arrays their addresses point into (runtime/contact_step.py c_address: the arguments keep nothing alive)."""
    real, calls, arrays, address = factory.rollout(scene, p.q)._batch, [], [], contact_rollout.c_address

    def capture(*args):
        calls.append(args)
        return real(*args)

    def keep(a):
        arrays.append(a)
        return address(a)
    contact_rollout.c_address = keep
    try:
        rollout_with(capture, scene, p, pd, factory)
    finally:
        contact_rollout.c_address = address
    assert len(calls) == 1, "a rollout of more than one part"
    return calls[0], arrays


def run_once(fn, args, m):
    """One rollout from step 0: COUNT and the warm start (WARM: ``m`` doubles) reset, then the C call."""
    ctypes.memset(args[22], 0, ctypes.sizeof(ctypes.c_int))
    ctypes.memset(args[13], 0, m * ctypes.sizeof(ctypes.c_double))
    fn(*args)


def rollout_with(fn, scene, p, pd, factory):
    """The Rollout of this checkout's Python around the C entry point ``fn``."""
    compiled = factory.rollout(scene, p.q)
    real = compiled._batch
    compiled._batch = compiled._lanes_batch = fn
    try:
        return sim.run(scene, p.q, np.zeros(scene.robot.nv), STEPS * DT, DT, pd, factory)
    finally:
        compiled._batch = compiled._lanes_batch = real


def compare(r, first):
    """'bit for bit' or the largest |Δq|, |Δv| of Rollout ``r`` against Rollout ``first``."""
    if all(np.array_equal(getattr(r, k), getattr(first, k)) for k in ("q", "v", "forces", "iterations")):
        return "bit for bit"
    return (f"|dq| {np.abs(r.q - first.q).max():.2g}, |dv| {np.abs(r.v - first.v).max():.2g}, iterations "
            f"{r.iterations.sum()} against {first.iterations.sum()}")


def time_builds(folders, copies, reps, calls, tmp):
    """Markdown lines: each folder's records against the first's, then its ns per step (median of its copies'
    medians, and each copy's) and the first's over it."""
    p, scene, pd, factory = scene_and_factory()
    args, _arrays = captured_call(scene, p, pd, factory)     # _arrays: alive while the arguments are used
    like, m = factory.rollout(scene, p.q)._batch, 3 * len(scene.candidates)
    fns = {}
    for i, folder in enumerate(folders):
        for c in range(copies):
            so = Path(tmp) / f"build{i}_copy{c}.so"
            shutil.copy(Path(folder) / "rollout.so", so)
            fns[i, c] = entry(so, Path(folder) / "rollout.json", like)
    first = rollout_with(fns[0, 0], scene, p, pd, factory)
    lines = [f"- {folder}: records against the first's: {compare(rollout_with(fns[i, 0], scene, p, pd, factory), first)}"
             for i, folder in enumerate(folders)]
    ns = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0 = time.thread_time()
            for _ in range(calls):
                run_once(fn, args, m)
            ns[k].append((time.thread_time() - t0) / calls / STEPS * 1e9)
    per = {i: [statistics.median(ns[i, c]) for c in range(copies)] for i in range(len(folders))}
    base = statistics.median(per[0])
    lines += [f"- {folder}: {statistics.median(per[i]):,.0f} ns per step (copies {', '.join(f'{x:,.0f}' for x in per[i])})"
              f", {base / statistics.median(per[i]):.3f}x the first" for i, folder in enumerate(folders)]
    return lines


if __name__ == "__main__":
    ab.main(__doc__, build, time_builds, f"go1 standing rollout, {SOLVER} to {TOL:g}, {STEPS} steps, "
            "{copies} copies x {reps} rounds x {calls} calls, thread CPU time:", 3, 7, 40, "/tmp/rollout_ab")
