"""Runtime of the generated C against Pinocchio, measured side by side in one run.

    .venv/bin/python bench/runtime.py                    # talos 2F, talos 2F+2H, go1 4F3, g1 2F
    .venv/bin/python bench/runtime.py -s go1/4F3 --calls 20000 --reps 7 -a pv_osim -a naive
    .venv/bin/python bench/runtime.py --dynamics         # the constrained-dynamics solvers and aba

Every available Delassus algorithm (``casadi_delassus.registry.delassus_algorithms()``)
is generated with the default ``auto`` compiler flags (cached in codegen_out/), called from a
C harness that dlopen()s its .so, and timed on the same random configurations as
``pinocchio::computeDelassusMatrix`` (C++ built against the pin wheel; Python timing with the
binding overhead subtracted if that cannot be built).  Repetitions are interleaved across the
contenders.  Writes bench/results/runtime.md, runtime.csv and runtime_<robot>_<scenario>.png.
``--dynamics`` times pv, pv_early, pv_soft, ltl, ltl_soft and aba instead, against
``pinocchio::constraintDynamics`` (and ``aba``) on the same random (q, v, τ), with the k that
poses Pinocchio's problem (``timing.pinocchio_k``); it writes runtime_dynamics.*.
"""
from __future__ import annotations

import argparse
import sys
import time

from common import RESULTS  # noqa: F401  (puts the repository on sys.path)

from casadi_delassus import timing  # noqa: E402
from casadi_delassus.registry import delassus_algorithms, dynamics_algorithms  # noqa: E402
from casadi_delassus.report import table  # noqa: E402

DEFAULT_SCENARIOS = ["talos/2F", "talos/2F+2H", "go1/4F3", "g1/2F"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", metavar="ROBOT/SCENARIO",
                    help=f"robot/scenario (repeatable; default: {' '.join(DEFAULT_SCENARIOS)})")
    ap.add_argument("-a", "--algorithm", action="append", metavar="ALGO",
                    help="algorithm (repeatable; default: every available Delassus algorithm)")
    ap.add_argument("--calls", type=int, default=timing.DEFAULT_CALLS, help="calls per repetition (default 10000)")
    ap.add_argument("--reps", type=int, default=timing.DEFAULT_REPS, help="repetitions (default 5)")
    ap.add_argument("--samples", type=int, default=timing.DEFAULT_SAMPLES, help="random configurations (default 64)")
    ap.add_argument("--pinocchio", choices=["auto", "cpp", "python", "none"], default="auto")
    ap.add_argument("--out", default=str(RESULTS), help="results folder (default bench/results)")
    ap.add_argument("--force", action="store_true",
                    help="regenerate the code even if cached (the cache key does not cover algorithm source edits)")
    ap.add_argument("--dynamics", action="store_true",
                    help="time the constrained-dynamics solvers and aba against constraintDynamics / aba")
    args = ap.parse_args(argv)
    default = [*dynamics_algorithms(), "aba"] if args.dynamics else delassus_algorithms()
    algorithms = args.algorithm or default
    name = "runtime_dynamics" if args.dynamics else "runtime"
    t_start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    progress(f"algorithms: {', '.join(algorithms)}; {args.reps} repetitions x {args.calls:,} calls")
    results = []
    for item in args.scenario or DEFAULT_SCENARIOS:
        robot, _, scenario = item.partition("/")
        res = timing.benchmark(robot, scenario or None, algorithms, calls=args.calls, reps=args.reps,
                               samples=args.samples, pinocchio=args.pinocchio, force=args.force,
                               progress=progress)
        results.append(res)
        print()
        print(timing.describe(res))
        print(table(timing.result_rows(res), timing.HEADERS))
        for note in res["notes"]:
            print(f"note: {note}")
    title = "Runtime: generated dynamics vs Pinocchio" if args.dynamics else "Runtime: generated C vs Pinocchio"
    for p in timing.write_results(results, args.out, name=name, title=title):
        print(f"-> {p}")
    progress("done")


if __name__ == "__main__":
    main()
