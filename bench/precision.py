"""Single against double precision (issue 26): configurations per µs of the batched f(Q) on one
core, the function generated in float (float32 Q) against the same function in double, for
each instruction set asked (the host's widest, and AVX2 with -mno-avx512f where the host has
AVX-512), with the error the float build measured at build and a fresh check of it.

    taskset -c 0 .venv/bin/python bench/precision.py [-s go1/4F3 -s talos/2F] [--reps 15] [--n 10000]

Repetitions are interleaved (each round makes one untimed call of each build, then CALLS
timed calls of the whole batch alternating between the builds, through the same door and
batch runtime); medians over all timed calls, min–max, and the ratio of medians (and of best
times).  Writes bench/results/precision.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from common import publish, say

import numpy as np

import casadi_delassus as cd
from casadi_delassus.timing.results import machine

SCENARIOS = ["go1/4F3", "talos/2F"]
CALLS = 5
FLAGS = {"native": ("auto",), "avx2": ("auto", "-mno-avx512f")}


def ns_per_config(f, Q, out):
    t0 = time.perf_counter_ns()
    f(Q, threads=1, out=out)
    return (time.perf_counter_ns() - t0) / len(Q)


def measure(robot, scenario, isa, reps, n):
    flags = FLAGS[isa]
    f64 = cd.generate(robot, scenario, cflags=flags)
    f32 = cd.generate(robot, scenario, cflags=flags, precision="single")
    Q = f64.robot.random_q(np.random.default_rng(0), n)
    builds = {"FP64": (f64, Q), "FP32": (f32, Q.astype(np.float32))}
    outs = {k: f(x, threads=1) for k, (f, x) in builds.items()}
    ns = {k: [] for k in builds}
    for r in range(reps):
        for k, (f, x) in builds.items():       # one untimed call each
            f(x, threads=1, out=outs[k])
        for _ in range(CALLS):                 # then FP64 and FP32 call by call: load from elsewhere hits both
            for k, (f, x) in builds.items():
                ns[k].append(ns_per_config(f, x, outs[k]))
        say(f"[{robot}/{scenario} {isa}] {r + 1}/{reps}: " + ", ".join(f"{k} {1e3 / v[-1]:.2f}/µs" for k, v in ns.items()))
    err = max(float(np.abs(outs["FP32"][i] - outs["FP64"][i]).max() / np.abs(outs["FP64"][i]).max())
              for i in range(min(n, 2000)))
    return {"f64": f64, "f32": f32, "ns": ns, "err": err, "check": cd.check_precision(f32)}


def row(robot, scenario, isa, m):
    a, d = m["ns"]["FP32"], m["ns"]["FP64"]
    p, b32, b64 = m["f32"].precision, m["f32"].manifest["batch"], m["f64"].manifest["batch"]
    med = lambda x: statistics.median(x)     # noqa: E731
    return (f"| {robot}/{scenario} | {m['f64'].manifest.get('auto', {}).get('chosen', '')} "
            f"{m['f64'].op_count['instructions']:,} | {b64['isa']} {b64['lanes']} / {b32['lanes']} | "
            f"{1e3 / med(d):.2f} ({1e3 / max(d):.2f}–{1e3 / min(d):.2f}) | {1e3 / med(a):.2f} ({1e3 / max(a):.2f}–"
            f"{1e3 / min(a):.2f}) | **{med(d) / med(a):.2f}×** ({min(d) / min(a):.2f}×) | {p['max_rel_error']:.1e} / "
            f"{p['median_rel_error']:.1e} | {m['err']:.1e} | {m['check']['worst']:.1e} "
            f"({'ok' if m['check']['passed'] else 'FAIL'}) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", help="robot/scenario (default: go1/4F3 and talos/2F)")
    ap.add_argument("--isa", action="append", choices=list(FLAGS), help="default: native, and avx2 on AVX-512 hosts")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args()
    avx512 = "avx512f" in open("/proc/cpuinfo").read()
    isas = args.isa or (["native", "avx2"] if avx512 else ["native"])
    rows = []
    for s in args.scenario or SCENARIOS:
        for isa in isas:
            rows.append(row(*s.split("/"), isa, measure(*s.split("/"), isa, args.reps, args.n)))
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    text = "\n".join([
        "# Single against double precision: batched f(Q), one core", "",
        f"Machine: {machine()}.",
        f"`taskset -c {cpus} .venv/bin/python bench/precision.py " + " ".join(f"-s {s}" for s in args.scenario or SCENARIOS)
        + f" --reps {args.reps} --n {args.n}`: {args.reps} interleaved repetitions, each "
        f"{CALLS} calls of f(Q, threads=1) on N = {args.n:,} configurations alternating FP64 and FP32 (FP32: a "
        f"float32 Q); median over the {args.reps * CALLS} timed calls of each; ratio of medians "
        "(of best times). Error: max / median over the build's 200 samples (manifest), the largest over this "
        "batch, and a fresh check (cd.check_precision: 200 other samples, within 4× the stored max).", "",
        "| scenario | auto → instructions | ISA, lanes FP64 / FP32 | FP64 configs/µs | FP32 configs/µs | FP32 / FP64 "
        "| stored error max / median | error in this batch | fresh check |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows, ""])
    publish("precision.md", text)


if __name__ == "__main__":
    main()
