"""What a Python single call costs above the C time (the thin door, runtime/door.c): for each
function, the C harness (timing.py's CHarness: a C loop over the .so) and, in this process,
``f(q)`` (a new array per call), ``f(q, out=D)`` and the ctypes path the door replaced
(CASADI_DELASSUS_DOOR=ctypes), each the median of rounds of 10,000 calls cycling over the
same 64 configurations; for a staged solver ``run("apply", lam=…)`` against the C harness of
its apply stage; and small batches, ``f(Q)`` for N = 16 and 256 (straight from door.c to
``<fn>_batch``) and the same call through the Python batch path (``f._evaluate``: the
inputs made canonical in Python, then door.c's run_batch, as every function of several
inputs runs), against the C batch harness (batch_harness.py, one
thread).  Rounds are interleaved across contenders.

    taskset -c 1 .venv/bin/python bench/door.py [--reps 9]

writes bench/results/door.md.
"""
from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from common import ns_per_call, publish, say

import casadi_delassus as cd
from casadi_delassus.runtime import door
from casadi_delassus.timing import CHarness, machine, random_samples
from casadi_delassus.timing.batch_harness import BatchHarness

FUNCTIONS = ["go1/4F3", "talos/2F", "talos/2F+2H", "g1/2F"]
BATCHES = [("go1/4F3", 16), ("go1/4F3", 256), ("talos/2F", 16), ("talos/2F", 256)]
STAGED = ("go2", "4F3", "damped_inverse_apply")


def ctypes_twin(f):
    os.environ[door.ENV] = "ctypes"
    try:
        return cd.load(f.manifest_path)
    finally:
        del os.environ[door.ENV]


def function_and_samples(spec):
    """The "auto" function of a "robot/scenario" spec and 64 of its random input sets."""
    robot, scenario = spec.split("/")
    f = cd.generate(robot, scenario, "auto")
    return f, random_samples(f.robot, f.constraints, 64, 0)


def contenders(spec):
    f, sets = function_and_samples(spec)
    qs = [x["q"] for x in sets]
    D = np.empty(f.output_specs[0]["shape"])
    g = ctypes_twin(f)
    return f, CHarness(f, sets), {"f(q)": (f, qs), "f(q, out=D)": (lambda q: f(q, out=D), qs),
                                  "ctypes f(q) (before)": (g, qs)}


def staged_contenders():
    F = cd.generate(*STAGED, stages=True)
    rng = np.random.default_rng(0)
    q, R = F.robot.random_q(rng), rng.uniform(0.5, 2.0, F.constraints.m)
    F.run("factor", q=q)
    F.run("damping", R=R)
    lams = [rng.normal(size=F.constraints.m) for _ in range(64)]
    apply = F.stages[-1]
    sets = [{"lam": lam, "w_damping": F._work["w_damping"]} for lam in lams]
    return apply, CHarness(apply, sets), {'run("apply", lam=…)': (lambda lam: F.run("apply", lam=lam), lams)}


def batch_contenders(spec, n):
    """(f, the C batch harness for n instances, {label: (call, [Q])}) for f(Q) of n configurations."""
    f, sets = function_and_samples(spec)
    Qs = [np.resize(np.array([x["q"] for x in sets]), (n, f.robot.nq))]
    python_path = lambda Q: f._evaluate((Q,), {}, None, None, True)      # noqa: E731 - what f(Q) did before
    return f, BatchHarness(f, sets, n=n, calls=max(1, 10_000 // n), threads=1), {
        f"f(Q), N = {n}": (f, Qs), f"Python batch path, N = {n} (before)": (python_path, Qs)}


def table_rows(spec, f, calls, ns):
    """One row per contender: median (min–max) µs per call and the overhead over the C harness."""
    c = statistics.median(ns[spec, "C harness"])
    return [f"| {spec} | {f.manifest['op_count']['instructions']:,} | {c / 1e3:.3f} | {k} | "
            f"{statistics.median(ns[spec, k]) / 1e3:.3f} ({min(ns[spec, k]) / 1e3:.2f}–{max(ns[spec, k]) / 1e3:.2f}) | "
            f"{(statistics.median(ns[spec, k]) - c) / 1e3:.3f} |" for k in calls]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    cases = [(spec, *contenders(spec)) for spec in FUNCTIONS]
    cases.append(("/".join(STAGED) + " (apply stage)", *staged_contenders()))
    batches = [(f"{spec} batch of {n}", n, *batch_contenders(spec, n)) for spec, n in BATCHES]
    ns = {(spec, k): [] for spec, _, _, calls in cases for k in ["C harness", *calls]}
    ns |= {(spec, k): [] for spec, _, _, _, calls in batches for k in ["C harness", *calls]}
    for r in range(args.reps):
        for spec, f, h, calls in cases:
            ns[spec, "C harness"].append(h.run(1).ns[0])
            for k, (call, xs) in calls.items():
                ns[spec, k].append(ns_per_call(call, xs, 10_000))
        for spec, n, f, h, calls in batches:
            ns[spec, "C harness"].append(h.run(1).ns[0] * n)
            for k, (call, xs) in calls.items():
                ns[spec, k].append(ns_per_call(call, xs, max(100, 20_000 // n)))
        say(f"round {r + 1}/{args.reps}")
    lines = ["# The Python door: a single call's cost above the C time", "",
             f"Machine: {machine()}.",
             f"`taskset -c {','.join(map(str, sorted(os.sched_getaffinity(0))))} .venv/bin/python bench/door.py "
             f"--reps {args.reps}`: median (min–max) of {args.reps} interleaved rounds of 10,000 calls over 64 inputs; "
             "overhead = Python median − C harness median.", "",
             "| function | instructions | C harness µs | contender | µs per call | overhead µs |", "| --- | --- | --- | --- | --- | --- |"]
    for spec, f, h, calls in cases:
        lines += table_rows(spec, f, calls, ns)
        h.close()
    lines += ["", "Small batches: per call of f(Q), against the C batch harness's time for the same N (one thread).", "",
              "| function | instructions | C batch µs per call | contender | µs per call | overhead µs |",
              "| --- | --- | --- | --- | --- | --- |"]
    for spec, n, f, h, calls in batches:
        lines += table_rows(spec, f, calls, ns)
        h.close()
    text = "\n".join(lines) + "\n"
    publish("door.md", text)


if __name__ == "__main__":
    main()
