"""What a Python call of a contact-mode library costs above its mode's function: for go1's 4F3
library (one mode, FL and RL feet), ``lib(mask, q)`` (the direct path, contact_modes/dispatch.py),
``lib.outputs(mask, q)`` (the checked path every call took before) and ``f(q)`` with
``f = lib.function(mask)`` fetched once,
each the median (and min..max) of rounds of 20,000 calls over 64 configurations, rounds
interleaved across contenders.

    taskset -c 1 .venv/bin/python bench/library_call.py [--reps 7]

writes bench/results/library_call.md.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile

import numpy as np

from common import ns_per_call, publish

import casadi_delassus as cd

CALLS = 20_000
MASK = 0b0101


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    robot = cd.load_robot("go1")
    with tempfile.TemporaryDirectory() as tmp:
        lib = cd.library(robot, "4F3", modes=hex(MASK), out_dir=tmp, jobs=1)
        f = lib.function(MASK)
        rng = np.random.default_rng(0)
        qs = [robot.random_q(rng) for _ in range(64)]
        contenders = {"lib(mask, q)": lambda q: lib(MASK, q),
                      "lib.outputs(mask, q) (checked path)": lambda q: lib.outputs(MASK, q)["delassus"],
                      "f(q), f = lib.function(mask)": lambda q: f(q)}
        times = {k: [] for k in contenders}
        for _ in range(args.reps):
            for name, call in contenders.items():
                times[name].append(ns_per_call(call, qs, CALLS) / 1e3)
    base = statistics.median(times["f(q), f = lib.function(mask)"])
    lines = ["| call (each in a lambda) | median µs | min..max µs | × f(q) |", "|---|---|---|---|"]
    for name, ts in times.items():
        lines.append(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f}..{max(ts):.2f} | "
                     f"{statistics.median(ts) / base:.2f} |")
    text = "\n".join([f"go1 4F3 library, mode {MASK:#x}, {args.reps} interleaved rounds of {CALLS:,} calls", "", *lines])
    publish("library_call.md", text + "\n")


if __name__ == "__main__":
    main()
