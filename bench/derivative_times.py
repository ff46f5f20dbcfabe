"""Generation and gcc times of derivative functions (issue 14, done-when 4: ≤ 60 s each on
talos 2F), with their instruction counts relative to the value function.

    python bench/derivative_times.py [ROBOT SCENARIO] [-a ALGO ...] [-d jvp|vjp|jacobian ...]

Every function is generated from scratch (force) into a temporary folder through the public
path (cd.generate: trace, cse, count, C, gcc with cflags "auto", manifest).  Wall times move
with the machine's load; the CPU columns (this process's for tracing and C, gcc's own from
getrusage of the children) are what a quiet machine would take.  Writes
bench/results/derivative_times_<robot>_<scenario>.md/.csv.
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time

from common import write

from casadi_delassus import generate, load_robot


def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def main():
    p = argparse.ArgumentParser()
    p.add_argument("robot", nargs="?", default="talos")
    p.add_argument("scenario", nargs="?", default="2F")
    p.add_argument("-a", "--algorithm", action="append", dest="algorithms")
    p.add_argument("-d", "--derivative", action="append", dest="derivatives")
    args = p.parse_args()
    robot = load_robot(args.robot)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for algo in args.algorithms or ["pv", "aba", "ltl", "pv_soft"]:
            value = generate(robot, args.scenario, algo, out_dir=d).op_count["instructions"]
            for mode in args.derivatives or ["jvp", "vjp", "jacobian"]:
                (me0, kids0), t0 = cpu(), time.perf_counter()
                f = generate(robot, args.scenario, algo, out_dir=d, derivative=mode, force=True)
                (me1, kids1), wall = cpu(), time.perf_counter() - t0
                m = f.manifest
                n = m["op_count"]["instructions"]
                rows.append([algo, mode, ",".join(sorted(set(m["derivative"]["method"].values()))), n,
                             round(n / value, 2), " ".join(x for x in m["cflags"] if x.startswith(("-O", "-D"))),
                             round(me1 - me0, 1), round(kids1 - kids0, 1), round(me1 - me0 + kids1 - kids0, 1),
                             round(m["timings_s"]["compile"], 1), round(wall, 1)])
                print(rows[-1], flush=True)
    write(f"derivative_times_{args.robot}_{args.scenario}", rows,
          ["algorithm", "derivative", "method", "instructions", "× value", "level", "trace+C CPU s", "gcc CPU s",
           "total CPU s", "gcc wall s", "total wall s"],
          f"Derivative functions on {args.robot} {args.scenario}: generation and gcc times (cflags auto)")


if __name__ == "__main__":
    main()
