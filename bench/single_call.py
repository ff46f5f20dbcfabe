"""What each part of the faster single call is worth: the generated function timed in C (the
C harness of timing.py) against variants of itself, interleaved in one run:

- as generated (sin/cos prologue on libmvec, greedy emission order, gcc's priority register
  allocator where gcc takes it);
- libm: the same .c compiled with -DCD_SINCOS_LIBM (the prologue calls libm's sin and cos);
- CasADi's order: generated again with codegen/schedule.reorder left out;
- gcc's default allocator: the same .c compiled without -fira-algorithm=priority;
- none of the three (the single call of the first wave of issue 15).

    taskset -c 1 .venv/bin/python bench/single_call.py [-s go1/4F3 …] [-a auto] [--reps 9]

writes bench/results/single_call.md.  Variants are built in a temporary folder.
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import publish, say

import casadi_delassus as cd
from casadi_delassus.codegen import emit
from casadi_delassus.codegen.build import IRA_PRIORITY
from casadi_delassus.timing import CHarness, machine, random_samples

SCENARIOS = ["go1/4F3", "talos/2F", "talos/2F+2H", "g1/2F"]


def compile_variant(f, c_file, so_file, drop=(), add=()):
    m = f.manifest
    flags = [x for x in m["cflags"] if x not in drop] + list(add)
    cmd = [*shlex.split(m["compiler"]), f"-I{f.so_path.parent.resolve()}", *flags, "-fPIC", "-shared", "-o", str(so_file),
           str(c_file), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    return so_file


def variants(spec, algorithm, tmp):
    """(the generated function, {label: .so of a variant with the same function name})."""
    robot, scenario = spec.split("/")
    f = cd.generate(robot, scenario, algorithm)
    reorder = emit.schedule.reorder
    emit.schedule.reorder = lambda code: code                 # CasADi's own order
    try:
        g = cd.generate(robot, scenario, algorithm, out_dir=tmp / "casadi_order")
    finally:
        emit.schedule.reorder = reorder
    c, d = f.so_path.with_suffix(".c"), tmp / f"{robot}_{scenario}"
    return f, {"as generated": f.so_path,
               "libm sin/cos (-DCD_SINCOS_LIBM)": compile_variant(f, c, d.with_suffix(".libm.so"),
                                                                   add=["-DCD_SINCOS_LIBM"]),
               "CasADi's order": g.so_path,
               "gcc's default allocator": compile_variant(f, c, d.with_suffix(".cb.so"), drop=[IRA_PRIORITY]),
               "none of the three": compile_variant(g, g.so_path.with_suffix(".c"), d.with_suffix(".none.so"),
                                                    drop=[IRA_PRIORITY], add=["-DCD_SINCOS_LIBM"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", help=f"robot/scenario (default: {' '.join(SCENARIOS)})")
    ap.add_argument("-a", "--algorithm", default="auto")
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    lines = ["# The single call: what the sin/cos prologue, the emission order and the register allocator are worth",
             "", f"Machine: {machine()}.",
             f"`taskset -c 1 .venv/bin/python bench/single_call.py --reps {args.reps}`: µs per call, median (min–max) of "
             f"{args.reps} interleaved repetitions x 10,000 calls over 64 random q (C harness).", "",
             "| scenario | variant | µs per call | × as generated |", "| --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="cd-single-") as tmp:
        for spec in args.scenario or SCENARIOS:
            f, sos = variants(spec, args.algorithm, Path(tmp))
            sets = random_samples(f.robot, f.constraints, 64, 0)
            harness = CHarness(f, sets)
            ns = {k: [] for k in sos}
            for r in range(args.reps):
                for k, so in sos.items():
                    harness.so_path = Path(so)
                    ns[k].append(harness.run(1).ns[0])
            harness.close()
            base = statistics.median(ns["as generated"])
            label = f"{spec} ({f.manifest.get('auto', {}).get('chosen', args.algorithm)})"
            for k, v in ns.items():
                lines.append(f"| {label} | {k} | {statistics.median(v) / 1e3:.3f} ({min(v) / 1e3:.3f}–{max(v) / 1e3:.3f}) "
                             f"| {statistics.median(v) / base:.2f} |")
            say(f"{spec}: done")
    text = "\n".join(lines) + "\n"
    publish("single_call.md", text)


if __name__ == "__main__":
    main()
