"""Compiled contact steps side by side (issue 33): the step of each problem of bench/contact.py (go1_stand, go1_slide,
talos_stand, a1_stand; PGS on the quadrupeds and ADMM on talos, ours' fastest in docs/results.md) as built by this
checkout and by others (PYTHONPATH picks which package builds), its C batch entry point ``<name>_step_batch`` on one
thread (as contact_bench.py times ours: one ctypes call for --calls states, so that the call's ~2 µs of Python is
not the step's) at the problem's state, interleaved in one process, so that before and after meet the same load.

    PYTHONPATH=/path/to/before .venv/bin/python bench/step_ab.py build --out /tmp/step_ab/before
    .venv/bin/python bench/step_ab.py build --out /tmp/step_ab/after
    taskset -c 0 .venv/bin/python bench/step_ab.py time /tmp/step_ab/before /tmp/step_ab/after [--copies 2] [--reps 21]

``time`` loads each build's .so from ``--copies`` copies (as bench/rollout_ab.py: the same code runs up to 5 % apart
from another load address), checks each build's v_next, λ and iterations against the first folder's (bit for bit, or
the largest differences), then per round times one batch of ``--calls`` states of every copy in turn in this thread's
CPU time; per problem and folder the median ns per step of its copies' medians, and the first folder's over it."""
from __future__ import annotations

import ctypes
import json
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

# the package first, from PYTHONPATH (as bench/rollout_ab.py)
from casadi_delassus import contact_step
from casadi_delassus.runtime.contact_step import DOUBLE_P, N_INFO, c_pointer, solver_options
from casadi_delassus.timing import contact_bench as cb

import ab  # bench/: this script's folder, first on sys.path

SOLVERS = {"talos_stand": "admm"}       # else PGS
BATCH_ARGS = [ctypes.c_int] + [DOUBLE_P] * 12 + [ctypes.c_int]


def solver(p):
    return SOLVERS.get(p.name, "pgs")


def build(out):
    """Build every problem's step with the package on sys.path and copy its .so and manifest to ``out``."""
    Path(out).mkdir(parents=True, exist_ok=True)
    for p in cb.all_problems():
        s = contact_step(p.robot, p.specs, solver=solver(p), mu=p.mu, out_dir="codegen_out", cflags=cb.CFLAGS)
        for suffix in (".so", ".json"):
            shutil.copy(Path(s.so).with_suffix(suffix), Path(out) / f"{p.name}{suffix}")
        print(f"{p.name}: {s.so} -> {out}")


class Call:
    """One copy's ``<name>_step_batch`` on ``n`` copies of problem ``p``'s state, one thread, and its outputs (the first
    state's)."""

    def __init__(self, so, manifest, p, n):
        self.lib = ctypes.CDLL(str(so))
        self.fn = getattr(self.lib, json.loads(Path(manifest).read_text())["function"] + "_step_batch")
        self.fn.argtypes, self.fn.restype = BATCH_ARGS, ctypes.c_int
        m, nv = 3 * len(p.mu), len(p.v)
        self.outs = {"v_next": np.empty((n, nv)), "lam": np.empty((n, m)), "sigma": np.empty((n, m)),
                     "info": np.empty((n, N_INFO))}
        ins = [np.ascontiguousarray(np.tile(x, (n, 1)), dtype=float) for x in (p.q, p.v, p.tau, p.mu)]
        ins.insert(3, np.full(n, p.dt))
        opts = solver_options(cb.TOL, 10_000, solver(p), True)
        self.args = (n, *map(c_pointer, ins), None, None, c_pointer(opts), *map(c_pointer, self.outs.values()), 1)
        self.keep = (ins, opts)

    @property
    def out(self):
        return {k: a[0] for k, a in self.outs.items()}

    def __call__(self):
        if self.fn(*self.args):
            raise RuntimeError("the step failed")


def compare(call, first):
    """'bit for bit' or the largest |Δv_next|, |Δλ| and the iterations of ``call`` against ``first``."""
    a, b = call.out, first.out
    its = f"iterations {a['info'][0]:.0f} against {b['info'][0]:.0f}"
    if all(np.array_equal(a[k], b[k]) for k in a):
        return f"bit for bit ({its})"
    return (f"|dv_next| {np.abs(a['v_next'] - b['v_next']).max():.2g}, |dlam| {np.abs(a['lam'] - b['lam']).max():.2g}, "
            f"{its}, residuals {a['info'][1:4].tolist()} against {b['info'][1:4].tolist()}")


def time_builds(folders, copies, reps, calls, tmp):
    """Markdown lines per problem: each folder's results against the first's, then its ns per step (median of its
    copies' medians, and each copy's) and the first's over it."""
    lines = []
    problems = cb.all_problems()
    calls_of = {}
    for p in problems:
        for i, folder in enumerate(folders):
            for c in range(copies):
                so = Path(tmp) / f"{p.name}_build{i}_copy{c}.so"
                shutil.copy(Path(folder) / f"{p.name}.so", so)
                calls_of[p.name, i, c] = Call(so, Path(folder) / f"{p.name}.json", p, calls)
                calls_of[p.name, i, c]()
    ns = {k: [] for k in calls_of}
    for _ in range(reps):
        for k, call in calls_of.items():
            t0 = time.thread_time()
            call()
            ns[k].append((time.thread_time() - t0) / calls * 1e9)
    for p in problems:
        first = calls_of[p.name, 0, 0]
        per = {i: [statistics.median(ns[p.name, i, c]) for c in range(copies)] for i in range(len(folders))}
        base = statistics.median(per[0])
        lines.append(f"{p.name}, {solver(p)}:")
        lines += [f"- {folder}: {compare(calls_of[p.name, i, 0], first)}; {statistics.median(per[i]):,.0f} ns per step "
                  f"(copies {', '.join(f'{x:,.0f}' for x in per[i])}), {base / statistics.median(per[i]):.3f}x the first"
                  for i, folder in enumerate(folders)]
    return lines


if __name__ == "__main__":
    ab.main(__doc__, build, time_builds, f"contact step at each problem's state, tol {cb.TOL:g}, "
            "{copies} copies x {reps} rounds x {calls} states, thread CPU time:", 2, 21, 2000, "/tmp/step_ab")
