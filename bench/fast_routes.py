"""The convenient call against the fast route it should match (issue 34 point 10):

- batch: ``D = f(Q)`` (in a loop: the previous output still held) against ``f(Q, out=D)`` (into
  a preallocated output, 64-byte aligned as f's own), and ``g(Q)``, g the same function loaded
  again, with its last three outputs held (so that each call gets a freshly allocated output,
  as every call did before the door kept released outputs), go1 4F3 naive on N random
  configurations (N = 100,000: a 115 MB output); one call per sample;
- library dispatch: ``lib(["FL_foot", "RL_foot"], q)`` (names) against ``lib(0b0101, q)`` (the
  mask) and ``f(q)`` with ``f = lib.function(0b0101)``, go1's 4F3 library; CALLS calls per
  sample, cycling through 64 configurations.

Each contender's samples come from REPS rounds interleaved across the contenders (one sample of
each in turn per round, after a warm-up round); the table gives the median, min..max and the
ratio of medians to the fast route.

    taskset -c 0,1 .venv/bin/python bench/fast_routes.py [--reps 11] [--n 100000]

writes bench/results/fast_routes.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from common import ns_per_call, publish

import casadi_delassus as cd
from casadi_delassus.runtime.batch import aligned_empty

CALLS = 20_000
MASK = 0b0101
NAMES = ["FL_foot", "RL_foot"]


def interleaved(contenders, reps):
    """{name: [sample, …]}: ``reps`` rounds of one sample of each contender in turn (each a
    callable returning its sample), after one round of warm-up."""
    times = {k: [] for k in contenders}
    for r in range(reps + 1):
        for name, sample in contenders.items():
            t = sample()
            if r:
                times[name].append(t)
    return times


def rows(times, fast, unit):
    """Markdown rows: median, min..max, × the median of ``fast``."""
    base = statistics.median(times[fast])
    return [f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f}..{max(ts):.2f} | "
            f"{statistics.median(ts) / base:.2f} |" for name, ts in times.items()], \
        f"| call | median {unit} | min..max {unit} | × {fast} |"


def batch_times(tmp, n, reps):
    """D = f(Q), f(Q, out=D) and a fresh output each call: ms per call."""
    robot = cd.load_robot("go1")
    f = cd.generate(robot, "4F3", "naive", out_dir=tmp)
    g = cd.load(f.manifest_path)                # a door of its own: its outputs never meet f's
    Q = robot.random_q(np.random.default_rng(0), n)
    out, held, last3 = aligned_empty((n, 12, 12)), {"D": f(Q)}, []

    def timed(call):
        t0 = time.perf_counter()
        call()
        return (time.perf_counter() - t0) * 1e3

    def loop():
        held["D"] = f(Q)

    def fresh():
        last3[:] = [*last3[-2:], g(Q)]
    return interleaved({"D = f(Q)": lambda: timed(loop), "f(Q, out=D)": lambda: timed(lambda: f(Q, out=out)),
                        "g(Q), a fresh output (last 3 held)": lambda: timed(fresh)}, reps)


def library_times(tmp, reps):
    """lib(names, q), lib(mask, q) and f(q): µs per call."""
    robot = cd.load_robot("go1")
    lib = cd.library(robot, "4F3", modes=[MASK], out_dir=tmp, jobs=1)
    f = lib.function(MASK)
    qs = [robot.random_q(np.random.default_rng(k)) for k in range(64)]
    calls = {"lib(names, q)": lambda q: lib(NAMES, q), "lib(mask, q)": lambda q: lib(MASK, q),
             "f(q), f = lib.function(mask)": lambda q: f(q)}
    return interleaved({k: (lambda c=c: ns_per_call(c, qs, CALLS) / 1e3) for k, c in calls.items()}, reps)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--n", type=int, default=100_000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        batch = batch_times(tmp, args.n, args.reps)
        lib = library_times(tmp, args.reps)
    b_rows, b_head = rows(batch, "f(Q, out=D)", "ms")
    l_rows, l_head = rows(lib, "lib(mask, q)", "µs")
    cpus = sorted(os.sched_getaffinity(0))
    text = "\n".join([f"CPUs {cpus}, {args.reps} interleaved rounds", "",
                      f"go1 4F3 naive, N = {args.n:,} (output {args.n * 144 * 8 / 1e6:.0f} MB), one call per sample",
                      "", b_head, "|---|---|---|---|", *b_rows, "",
                      f"go1 4F3 library, mode {MASK:#x} ({', '.join(NAMES)}), {CALLS:,} calls per sample", "",
                      l_head, "|---|---|---|---|", *l_rows])
    publish("fast_routes.md", text + "\n")


if __name__ == "__main__":
    main()
