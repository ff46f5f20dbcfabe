"""gcc time against function size and optimisation level (why cflags 'auto' lowers -O for
huge functions).  Usage: python bench/compile_times.py [ALGO ...]"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import write

from casadi_delassus import load_robot
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.emit import casadi_source
from casadi_delassus.codegen.opcount import count_ops
from casadi_delassus.codegen.trace import trace

CASES = [("go1", "4F3"), ("talos_reduced", "2F"), ("talos", "2F"), ("talos", "2F+2H")]
LEVELS = ["-O0", "-O1", "-O2"]


def main(algorithms):
    rows = []
    for robot_name, scenario in CASES:
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
    write("compile_times", rows, ["robot", "scenario", "algorithm", "instructions", *(f"gcc {l} s" for l in LEVELS)],
          "gcc time by optimisation level")


if __name__ == "__main__":
    main(sys.argv[1:] or ["naive"])
