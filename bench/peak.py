"""This machine's measured peaks (casadi_delassus/timing/peak.py: scalar add+mul, AVX2 FMA, libm and
libmvec sin/cos), written as a table.

    taskset -c 1 .venv/bin/python bench/peak.py [--reps 7] [--seconds 0.2]

writes bench/results/peak.md and peak.json.
"""
from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from common import publish

from casadi_delassus.timing.peak import LABELS, PER_ANGLE, measure


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.2)
    args = ap.parse_args()
    res = measure(args.reps, args.seconds)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    lines = [f"# Measured peaks ({cpu})", "", f"`taskset -c 1 .venv/bin/python bench/peak.py --reps {args.reps}`; "
             "best and median of the repetitions.", "", "| kernel | best | median |", "| --- | --- | --- |"]
    for name, v in res.items():
        if name in PER_ANGLE:
            lines.append(f"| {LABELS[name]} | {v['ns_best']:.2f} | {v['ns_median']:.2f} |")
        else:
            lines.append(f"| {LABELS[name]} | {v['best']:.2f} | {v['median']:.2f} |")
    text = "\n".join(lines) + "\n"
    publish("peak.md", text).with_suffix(".json").write_text(json.dumps({"cpu": cpu, **res}, indent=1))


if __name__ == "__main__":
    main()
