"""Configurations per µs, side by side in one run (casadi_delassus/timing/batch_bench.py): our single
call in a C loop, our batched call on one core and on all cores (C and Python f(Q)),
Pinocchio's computeDelassusMatrix in a C++ loop and MuJoCo's J M⁻¹ Jᵀ in a C loop, with
instructions/ns against the machine's peaks measured in the same run, and what a Python
single call costs above the C time.  The CLI's ``bench ROBOT -s S --batch N`` runs one scenario.

    taskset -c 0,1 .venv/bin/python bench/batch.py [-s go1/4F3 -s talos/2F] [-a auto] [--reps 7] [--n 10000]

writes bench/results/batch.md and batch.json.
"""
from __future__ import annotations

import argparse
import json
import os

from common import publish, say

from casadi_delassus.timing import batch_bench

SCENARIOS = ["go1/4F3", "talos/2F"]


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
    peaks = batch_bench.measure_peaks(max(all_cpus), say)
    say("peaks: " + ", ".join(f"{k} {v['best']:.2f}" for k, v in peaks.items()))
    results = [batch_bench.run(*s.split("/"), algorithm=args.algorithm, reps=args.reps, n_c=args.n, n_py=args.n_python,
                               all_cpus=all_cpus, progress=say) for s in args.scenario or SCENARIOS]
    command = (f"taskset -c {','.join(map(str, sorted(all_cpus)))} .venv/bin/python bench/batch.py "
               + " ".join(f"-s {s}" for s in args.scenario or SCENARIOS) + f" --reps {args.reps} --n {args.n}")
    text = batch_bench.markdown(results, peaks, command, args.reps)
    md = publish("batch.md", text)
    md.with_suffix(".json").write_text(json.dumps(batch_bench.as_json(results, peaks), indent=1))


if __name__ == "__main__":
    main()
