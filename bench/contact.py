"""Frictional contact step (issue 25) on its three problems: casadi_delassus/timing/contact_bench.py
(ours against Pinocchio's ADMM / PGS routes and MuJoCo's PGS / CG / Newton), plus the batched
step's throughput on go1 over one and two cores.  ``casadi-delassus bench ROBOT --contact`` runs
the same for one robot's problems.

    taskset -c 0,1 .venv/bin/python bench/contact.py [--reps 11] [--calls 2000]

Writes bench/results/contact.md."""
from __future__ import annotations

import argparse
import os

import common
from casadi_delassus.timing import contact_bench as cb
from casadi_delassus.verify import contact_problems as cp

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    problems = [cp.build(n) for n in cp.PROBLEMS]
    times, notes = cb.measure(problems, args.reps, args.calls, args.out)
    command = (f"taskset -c {','.join(map(str, cpus))} .venv/bin/python bench/contact.py --reps {args.reps} "
               f"--calls {args.calls}")
    text = cb.markdown(problems, times, notes, command, args.reps, cb.batch_rows(problems[0], args.out, args.reps))
    common.publish("contact.md", text)


if __name__ == "__main__":
    main()
