"""Configurations per µs, side by side in one run: our single call in a C loop, our batched
call (``<fn>_batch``, codegen/batch.py) on one core and on all cores (C harness,
timing/batch_harness.py), the same from Python (``f(Q)``, N = 10,000), Pinocchio's
computeDelassusMatrix in a C++ loop (timing.py's harness) and MuJoCo computing the same
J M⁻¹ Jᵀ in a C loop (bench/mujoco_delassus.py), plus SX instructions per ns against the
machine's measured peaks (bench/peak.py).  Repetitions are interleaved (round r runs every
contender once); one-core contenders run on the last allowed core (their process's CPU
affinity), all-core ones on every allowed core.

    taskset -c 0,1 .venv/bin/python bench/batch.py [-s go1/4F3 -s talos/2F] [-a auto] [--reps 7]

writes bench/results/batch.md and batch.json.  Also prints what a Python single call costs
above the C time (per-call overhead of the ctypes door, median of 100,000 calls).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import common  # noqa: F401
from common import RESULTS
import peak
from mujoco_delassus import MujocoHarness, MujocoModel

import casadi_delassus as cd
from casadi_delassus.timing.batch_harness import BatchHarness
from casadi_delassus.codegen.batch import cores
from casadi_delassus.timing import CHarness, Timing, random_samples
from casadi_delassus.timing.pinocchio_harnesses import PinocchioCppHarness
from casadi_delassus.verify.check import relative_error

SCENARIOS = ["go1/4F3", "talos/2F"]


def say(msg):
    print(msg, file=sys.stderr, flush=True)


class PythonBatch:
    """``f(Q, threads=…)`` timed in this process; ns per configuration."""

    def __init__(self, f, Q, threads, label):
        self.f, self.Q, self.threads, self.label = f, Q, threads, label
        self.out = np.empty((len(Q), *f.output_specs[0]["shape"]))
        self.f(Q, threads=threads, out=self.out)

    def run(self, reps=1):
        ns = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            self.f(self.Q, threads=self.threads, out=self.out)
            ns.append((time.perf_counter_ns() - t0) / len(self.Q))
        return Timing(self.label, f"Python f(Q), {self.threads} thread(s), N = {len(self.Q)}", ns, 1, len(self.Q),
                      self.out[0].reshape(-1, order="F"))

    def close(self):
        pass


def python_call_overhead(f, q, c_ns, calls=100_000):
    """Median per-call ns of ``f(q)`` from Python over ``calls`` calls (10 rounds), minus ``c_ns``."""
    rounds = []
    for _ in range(10):
        t0 = time.perf_counter_ns()
        for _ in range(calls // 10):
            f(q)
        rounds.append((time.perf_counter_ns() - t0) / (calls // 10))
    return statistics.median(rounds) - c_ns


def pinned(cpus):
    """Context: this process (and the harnesses it starts) on ``cpus``."""
    class _Pin:
        def __enter__(self):
            self.saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, cpus)

        def __exit__(self, *exc):
            os.sched_setaffinity(0, self.saved)
    return _Pin()


def run_scenario(name, algorithm, reps, n_c, n_py, all_cpus, one_cpu):
    robot_name, scenario = name.split("/")
    f = cd.generate(robot_name, scenario, algorithm)
    m = f.manifest
    label = f"auto→{m['auto']['chosen']}" if "auto" in m else algorithm
    say(f"[{name}] {label}: {m['op_count']['instructions']:,} instructions, batch {m['batch']}, "
        f"gcc {m['timings_s']['compile']} s")
    sets = random_samples(f.robot, f.constraints, 64, 0)
    qs = [x["q"] for x in sets]
    Q = np.resize(np.array(qs), (n_py, f.robot.nq))
    threads = len(all_cpus)
    one = {
        "single call (C loop)": CHarness(f, sets, label="single"),
        "batch, 1 core (C)": BatchHarness(f, sets, n=n_c, threads=1),
        "batch, 1 core (Python f(Q))": PythonBatch(f, Q, 1, "python x1"),
    }
    many = {
        f"batch, {threads} cores (C)": BatchHarness(f, sets, n=n_c, threads=threads),
        f"batch, {threads} cores (Python f(Q))": PythonBatch(f, Q, threads, f"python x{threads}"),
    }
    notes = []
    try:
        one["Pinocchio computeDelassusMatrix (C++ loop)"] = PinocchioCppHarness(f.robot, f.constraints, sets,
                                                                                progress=say)
    except Exception as exc:   # noqa: BLE001 - reported, the others are still measured
        notes.append(f"Pinocchio not measured: {exc}")
    try:
        mj = MujocoModel(f.robot, f.constraints)
        one["MuJoCo J M⁻¹ Jᵀ (C loop, 1 thread)"] = MujocoHarness(mj, qs, calls=3000)
        many[f"MuJoCo J M⁻¹ Jᵀ (C loop, {threads} threads)"] = MujocoHarness(mj, qs, calls=3000 * threads,
                                                                              threads=threads)
        worst = max(relative_error(mj.delassus(q), f(q)) for q in qs[:8])
        notes.append(f"MuJoCo's J M⁻¹ Jᵀ vs ours: largest relative difference {worst:.1e} over 8 configurations"
                     + (f" (MuJoCo needed positive-definite inertias: off-diagonals of {mj.changed_inertias} zeroed)"
                        if mj.changed_inertias else ""))
    except Exception as exc:   # noqa: BLE001
        notes.append(f"MuJoCo not measured: {exc}")
    timings = {}
    try:
        for r in range(reps):
            for group, cpus in ((one, one_cpu), (many, all_cpus)):
                for key, h in group.items():
                    with pinned(cpus):
                        t = h.run(1)
                    timings[key] = t if key not in timings else timings[key].extend(t)
            say(f"[{name}] repetition {r + 1}/{reps}: " +
                ", ".join(f"{k.split(' (')[0]} {1e3 / t.ns[-1]:.2f}/µs" for k, t in timings.items()))
    finally:
        for h in (*one.values(), *many.values()):
            h.close()
    for key in timings:
        if key.startswith(("batch", "MuJoCo")) and timings[key].output is not None and "Python" not in key:
            out = timings[key].output
            ref = f(qs[0]).reshape(-1, order="F") if key.startswith("MuJoCo") else f(qs[0]).reshape(-1)
            if out.size == ref.size and relative_error(out, ref) > 1e-6:
                notes.append(f"{key}: its sample 0 differs from the single call by {relative_error(out, ref):.1e}")
    with pinned(one_cpu):
        overhead = python_call_overhead(f, qs[0], timings["single call (C loop)"].median)
    notes.append(f"Python single call f(q): {overhead / 1e3:.2f} µs above the C time per call (ctypes door, median "
                 "of 10 rounds x 10,000 calls)")
    return {"scenario": name, "algorithm": label, "manifest": m, "timings": timings, "notes": notes,
            "threads": threads, "n_c": n_c, "n_py": n_py}


def rows(res, peaks):
    m, t = res["manifest"], res["timings"]
    ins, flops = m["op_count"]["instructions"], m["op_count"]["flops"]
    single = t["single call (C loop)"].median
    scalar_peak = peaks["scalar_add_mul_ops_per_ns"]["best"]
    simd_peak = peaks.get("avx2_fma_flop_per_ns", {}).get("best")
    out = []
    for key, x in t.items():
        per_core = x.median * (res["threads"] if "cores" in key or "threads)" in key else 1)
        ours = not key.startswith(("Pinocchio", "MuJoCo"))
        ipns = ins / per_core if ours else None
        out.append([key, round(1e3 / x.median, 3), f"{1e3 / x.max:.2f}–{1e3 / x.min:.2f}",
                    round(single / x.median, 2), round(t["single call (C loop)"].min / x.min, 2),
                    round(ipns, 2) if ipns else None,
                    f"{100 * ipns / scalar_peak:.0f} %" if ipns else "",
                    f"{100 * flops / per_core / simd_peak:.1f} %" if ours and simd_peak else ""])
    return out


HEADERS = ["contender", "configs/µs (median)", "min–max", "× single call", "× single call (best vs best)",
           "SX instr/ns per core",
           "of scalar peak", "flops of AVX2 FMA peak"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", help="robot/scenario (default: go1/4F3 and talos/2F)")
    ap.add_argument("-a", "--algorithm", default="auto")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--n", type=int, default=10_000, help="batch size of the C batch harness (default 10,000, "
                    "as the Python one: memory traffic grows with it)")
    ap.add_argument("--n-python", type=int, default=10_000)
    args = ap.parse_args()
    all_cpus = os.sched_getaffinity(0)
    one_cpu = {max(all_cpus)}
    say(f"measuring the machine's peaks on cpu {max(all_cpus)} ...")
    with pinned(one_cpu):
        peaks = peak.measure(reps=5, seconds=0.1)
    say("peaks: " + ", ".join(f"{k} {v['best']:.2f}" for k, v in peaks.items()))
    results = [run_scenario(s, args.algorithm, args.reps, args.n, args.n_python, all_cpus, one_cpu)
               for s in args.scenario or SCENARIOS]
    from casadi_delassus.timing import machine
    md = ["# Batched evaluation: configurations per µs", "",
          f"Machine: {machine()}; {len(all_cpus)} cores allowed.",
          f"`taskset -c {','.join(map(str, sorted(all_cpus)))} .venv/bin/python bench/batch.py --reps {args.reps}`; "
          f"median of {args.reps} interleaved repetitions; one-core contenders on cpu {max(all_cpus)}.",
          f"Peaks measured in the same run (bench/peak.py): scalar add+mul "
          f"{peaks['scalar_add_mul_ops_per_ns']['best']:.2f} ops/ns"
          + (f", AVX2 FMA {peaks['avx2_fma_flop_per_ns']['best']:.2f} flop/ns" if "avx2_fma_flop_per_ns" in peaks else "")
          + ". `SX instr/ns per core` = the traced function's instructions × configurations per ns per core "
          "(what the batch does 4 lanes at a time counts 4 times).", ""]
    for res in results:
        m = res["manifest"]
        md += [f"## {res['scenario']} ({res['algorithm']}, {m['op_count']['instructions']:,} instructions, "
               f"batch: {m['batch']['lanes']} lanes, {m['batch']['isa']}, sin/cos {m['batch']['sincos']}; "
               f"C batch n = {res['n_c']}, Python N = {res['n_py']})", "",
               "| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        md += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows(res, peaks)]
        md += [""] + [f"- {n}" for n in res["notes"]] + [""]
    text = "\n".join(md)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "batch.md").write_text(text)
    (RESULTS / "batch.json").write_text(json.dumps({
        "peaks": peaks, "results": [{"scenario": r["scenario"], "algorithm": r["algorithm"], "notes": r["notes"],
                                     "ns": {k: t.ns for k, t in r["timings"].items()}} for r in results]}, indent=1))
    say(f"-> {RESULTS / 'batch.md'}, batch.json")


if __name__ == "__main__":
    main()
