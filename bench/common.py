"""Helpers shared by the benchmark scripts: where results go, Markdown/CSV writers, the papers'
Talos constraint sets, the instruction count of a traced algorithm and the log-log slope."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SHARED = ROOT.parent / "shared"
ANCHOR_JSON = SHARED / "anchors" / "talos_spatial_v2_model.json"
sys.path.insert(0, str(ROOT))

from casadi_delassus.api import constraint_set  # noqa: E402
from casadi_delassus.codegen.trace import trace  # noqa: E402
from casadi_delassus.constraints import ConstraintSet  # noqa: E402
from casadi_delassus.model.registry import registry  # noqa: E402
from casadi_delassus.opcount import count_ops  # noqa: E402
from casadi_delassus.report import table, to_csv  # noqa: E402

# the papers' constraint sets on their Talos model (../shared/anchors/README.md): the registry's
# talos scenarios, whose link names the spatial_v2 model shares
ANCHOR_SPECS = registry()["talos"]["scenarios"]["anchor"]
DYNAMICS_ANCHOR_SPECS = registry()["talos"]["scenarios"]["anchor-dynamics"]


def instructions(robot, constraints, algorithm, cse=True, osim=False):
    """Instructions of the traced function (constraints: a ConstraintSet, a scenario or specs)."""
    cs = constraints if isinstance(constraints, ConstraintSet) else constraint_set(robot, constraints)[0]
    return count_ops(trace(robot, cs, algorithm, cse=cse, osim=osim)[0])["instructions"]


def slope(x, y, larger_half=False):
    """Least-squares slope of log y against log x over the points y has (None skipped);
    ``larger_half``: over x at or above their median only (the asymptotic growth)."""
    x, y = (np.asarray([a for a, b in zip(x, y) if b is not None], float),
            np.asarray([b for b in y if b is not None], float))
    keep = x >= np.median(x) if larger_half else np.ones(len(x), bool)
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def ns_per_call(call, args, calls):
    """Nanoseconds per ``call(x)`` over ``calls`` calls cycling through ``args``."""
    n = len(args)
    t0 = time.perf_counter_ns()
    for i in range(calls):
        call(args[i % n])
    return (time.perf_counter_ns() - t0) / calls


def say(msg):
    """A progress line on stderr (stdout keeps the tables)."""
    print(msg, file=sys.stderr, flush=True)


def publish(name, text, preface=""):
    """Print ``text`` (the table), write ``preface`` + ``text`` to results/<name> and say where; returns the path."""
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(preface + text)
    say(f"-> {path}")
    return path


def save_figure(fig, name):
    """Write the matplotlib figure ``fig`` to results/<name>, close it and say where; returns the path."""
    import matplotlib.pyplot as plt
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    fig.savefig(path, dpi=120)
    plt.close(fig)
    say(f"-> {path}")
    return path


def write(name, rows, headers, title=""):
    """Print the table and write results/<name>.md and .csv."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = table(rows, headers)
    print(text)
    md = [f"# {title or name}", "", "| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    md += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else f"{v:.3g}" if isinstance(v, float) else str(v)
                             for v in r) + " |" for r in rows]
    (RESULTS / f"{name}.md").write_text("\n".join(md) + "\n")
    (RESULTS / f"{name}.csv").write_text(to_csv(rows, headers) + "\n")
    print(f"-> {RESULTS / name}.md, .csv")


def scalar_peak(cpu):
    """(this machine's scalar add+mul peak in ops/ns, where it comes from): bench/results/peak.json when bench/peak.py
    wrote it (on a quiet machine), else measured now on ``cpu`` (in wall time: low on a loaded machine)."""
    import json
    import os
    path = RESULTS / "peak.json"
    if path.is_file():
        return json.loads(path.read_text())["scalar_add_mul_ops_per_ns"]["best"], "bench/results/peak.json"
    from casadi_delassus.timing.peak import measure
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        return measure(reps=3, seconds=0.1)["scalar_add_mul_ops_per_ns"]["best"], "measured in this run"
    finally:
        os.sched_setaffinity(0, allowed)
