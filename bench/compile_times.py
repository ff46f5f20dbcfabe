"""Code-generation and gcc times.

    python bench/compile_times.py pipeline [ALGO ...]   # trace/emit/compile times with cflags 'auto' on talos 2F+2H
    python bench/compile_times.py levels [ALGO ...]     # gcc time by -O level against function size
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write

from casadi_delassus import generate, load_robot
from casadi_delassus.registry import delassus_algorithms
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.emit import casadi_source
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace

LEVEL_CASES = [("go1", "4F3"), ("talos_reduced", "2F"), ("talos", "2F"), ("talos", "2F+2H")]
LEVELS = ["-O0", "-O1", "-O2"]


def pipeline(algorithms, robot_name="talos", scenario="2F+2H"):
    robot = load_robot(robot_name)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for algo in algorithms:
            t0 = time.perf_counter()
            f = generate(robot, scenario, algo, out_dir=d, force=True)
            total = time.perf_counter() - t0
            m = f.manifest
            t = m["timings_s"]
            rows.append([algo, m["op_count"]["instructions"], " ".join(m["cflags"]), t["trace"], t["emit"],
                         t["compile"], round(total, 2), m["so_bytes"]])
            print(rows[-1], flush=True)
    write("codegen_times", rows, ["algorithm", "instructions", "cflags", "trace s", "emit s", "gcc s", "total s",
                                  ".so bytes"], f"Generation and compile times, {robot_name} {scenario}")


def levels(algorithms):
    rows = []
    for robot_name, scenario in LEVEL_CASES:
        robot = load_robot(robot_name)
        cs, _ = constraint_set(robot, scenario)
        for algo in algorithms:
            f, _, _ = trace(robot, cs, algo, name="f")
            with tempfile.TemporaryDirectory() as d:
                c = Path(d) / "f.c"
                c.write_text(casadi_source(f))
                times = []
                for level in LEVELS:
                    t0 = time.perf_counter()
                    subprocess.run(["gcc", level, "-fPIC", "-shared", "-o", str(Path(d) / "f.so"), str(c)], check=True)
                    times.append(round(time.perf_counter() - t0, 2))
            rows.append([robot_name, scenario, algo, count_ops(f)["instructions"], *times])
            print(rows[-1], flush=True)
    write("compile_levels", rows, ["robot", "scenario", "algorithm", "instructions", *(f"gcc {l} s" for l in LEVELS)],
          "gcc time by optimisation level")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "pipeline"
    algos = sys.argv[2:] or delassus_algorithms()
    {"pipeline": pipeline, "levels": levels}[mode](algos)
    print(f"results in {RESULTS}")
