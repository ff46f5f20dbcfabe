"""Reproduce the papers' operation-count studies (PV-OSIMr paper Figs. 3-5) and a table of
every Delassus algorithm on every registry scenario.  Writes bench/results/*.md, *.csv, *.png
and prints the fitted slopes / ratios next to the papers' claims.

    python bench/opcount_figures.py [--quick] [--study stem|kchain|allchain|feet|registry ...] [--jobs N]

The rows of a study are independent jobs, run on N local processes (default: every core)
through casadi_delassus/executor.py; the tables and plots do not depend on N.
"""
from __future__ import annotations

import argparse
import time

from common import ANCHOR_JSON, ANCHOR_SPECS, instructions, save_figure, slope, write

from casadi_delassus import load_robot
from casadi_delassus.registry import ALGORITHMS
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.trace import choose_cheapest
from casadi_delassus.executor import Job, in_order, run
from casadi_delassus.model import registry

DELASSUS = [a for a in ("naive", "ltl_osim", "kjr", "efpa", "pv_osim", "pv_osimr", "pv_osim_fast") if a in ALGORITHMS]


JOBS = {"workers": None}       # --jobs


def row_counts(robot_spec, constraints, algorithms, choose=False):
    """One job: {algorithm: instructions} for a robot (name, file or synthetic spec) and
    constraints, and with ``choose`` also what ``-a auto`` picks."""
    robot = load_robot(robot_spec)
    counts = {a: instructions(robot, constraints, a) for a in algorithms}
    if choose:
        counts["-a auto"] = choose_cheapest(robot, constraint_set(robot, constraints)[0])[0]
    return counts


def count_rows(targets, algorithms, choose=False):
    """[{algorithm: instructions}] of every (label, robot spec, constraints) target, computed
    as independent jobs and printed in order as they arrive."""
    labels = iter(label for label, _, _ in targets)
    return run([Job(str(label), row_counts, (robot, constraints, algorithms, choose)) for label, robot, constraints in targets],
               workers=JOBS["workers"], on_done=in_order(lambda counts: print(next(labels), counts, flush=True)))


COLORS = {"naive": "k", "ltl_osim": "tab:brown", "kjr": "tab:purple", "efpa": "tab:green",
          "pv_osim": "tab:blue", "pv_osimr": "tab:red", "pv_osim_fast": "tab:orange"}


def plot(name, panels, xlabel, title, loglog=False):
    """``panels``: {panel title: {algorithm: (x, y)}} — one axis per panel, one colour per
    algorithm throughout (a single panel may be given as {algorithm: (x, y)})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if all(isinstance(v, tuple) for v in panels.values()):
        panels = {"": panels}
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 1.5, 3.8), squeeze=False)
    for ax, (panel, series) in zip(axes[0], panels.items()):
        for label, (x, y) in series.items():
            ax.plot(x, y, marker="o", ms=3, label=label, color=COLORS.get(label))
        if loglog:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_title(panel, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("instructions (SX ops)")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, f"{name}.png")


def study_stem(quick):
    """PV-OSIMr paper Fig. 3: PV-OSIMr = PV-OSIM for one branch per side, cheaper from two."""
    algos = [a for a in ("pv_osim", "pv_osimr", "efpa") if a in ALGORITHMS]
    lengths = [1, 5, 10, 20] if quick else [1, 2, 5, 10, 15, 20, 30, 40]
    rows, series = [], {}
    specs = [(b, n, f"stem:n={n},branches={b},length=7") for b in (1, 2, 4, 7) for n in lengths]
    for (b, n, spec), counts in zip(specs, count_rows([(spec, spec, "default") for _, _, spec in specs], algos)):
        rows.append([b, n, load_robot(spec).nv, 12 * b, *counts.values()])
        for a in algos:
            x, y = series.setdefault(f"b = {b} branches per side", {}).setdefault(a, ([], []))
            x.append(n)
            y.append(counts[a])
    write("stem", rows, ["branches/side", "stem n", "nv", "m", *algos], "Long stem with branches (PV-OSIMr Fig. 3)")
    plot("stem", series, "stem length n", "Long stem with b branches per side (PV-OSIMr paper Fig. 3)")
    if {"pv_osim", "pv_osimr"} <= set(algos):
        print("claim: PV-OSIMr equals PV-OSIM for one branch and wins from two branches on")
        for b in (1, 2, 4, 7):
            r = [row for row in rows if row[0] == b]
            ratios = [row[4 + algos.index("pv_osim")] / row[4 + algos.index("pv_osimr")] for row in r]
            print(f"  b = {b}: PV-OSIM / PV-OSIMr = {min(ratios):.3f} .. {max(ratios):.3f}")


def study_kchain(quick):
    """PV-OSIMr paper Fig. 4a: log-log slopes PV-OSIMr ~ 2, EFPA ~ 3, PV-OSIM ~ 4."""
    algos = [a for a in ("pv_osimr", "efpa", "pv_osim") if a in ALGORITHMS]
    ks = [2, 3, 4, 5, 6] if quick else [2, 3, 4, 5, 6, 7, 8]
    rows = []
    for k, counts in zip(ks, count_rows([(k, f"kchain:k={k}", "default") for k in ks], algos)):
        rows.append([k, load_robot(f"kchain:k={k}").nv, 6 * k, *counts.values()])
    write("kchain", rows, ["k", "n", "m", *algos], "k² chain, every k-th link welded (PV-OSIMr Fig. 4a)")
    plot("kchain", {a: (ks, [r[3 + i] for r in rows]) for i, a in enumerate(algos)}, "k", "k² chain", loglog=True)
    claims = {"pv_osimr": 2, "efpa": 3, "pv_osim": 4}
    tail = slice(len(ks) // 2, None)   # asymptotic slope: the larger k
    for i, a in enumerate(algos):
        print(f"  slope {a}: {slope(ks[tail], [r[3 + i] for r in rows][tail]):.2f} (paper: ~{claims[a]})")


def study_allchain(quick):
    """PV-OSIMr paper Fig. 4b: a chain welded on every link; PV-OSIMr and EFPA same slope."""
    algos = [a for a in ("pv_osimr", "efpa", "pv_osim") if a in ALGORITHMS]
    ns = [4, 8, 16, 32] if quick else [4, 8, 16, 24, 32, 48]
    rows = [[n, 6 * n, *counts.values()]
            for n, counts in zip(ns, count_rows([(n, f"chain:n={n},all=1", "default") for n in ns], algos))]
    write("allchain", rows, ["n", "m", *algos], "Chain with a 6D weld on every link (PV-OSIMr Fig. 4b)")
    plot("allchain", {a: (ns, [r[2 + i] for r in rows]) for i, a in enumerate(algos)}, "links n",
         "Chain, every link welded", loglog=True)
    for i, a in enumerate(algos):
        print(f"  slope {a}: {slope(ns[len(ns) // 2:], [r[2 + i] for r in rows][len(ns) // 2:]):.2f}")


def study_feet(quick):
    """PV-OSIMr paper Fig. 5: feet as 6D welds vs 4 x 3D points per foot."""
    algos = [a for a in DELASSUS if a != "naive"]
    name = "atlas" if registry.is_available("atlas") else "talos"
    scenarios = ("2F", "2F4x3")
    rows = [[name, scen, *counts.values()]
            for scen, counts in zip(scenarios, count_rows([(scen, name, scen) for scen in scenarios], algos))]
    write("feet", rows, ["robot", "scenario", *algos], f"{name}: feet 6D vs 4 x 3D per foot (PV-OSIMr Fig. 5)")
    if {"pv_osim", "pv_osimr"} <= set(algos):
        r = rows[1]
        ratio = r[2 + algos.index("pv_osim")] / r[2 + algos.index("pv_osimr")]
        print(f"  4x3D per foot: PV-OSIM / PV-OSIMr = {ratio:.3f} (paper, Atlas: 1.199)")


def study_registry(quick):
    """Every Delassus algorithm on every registry scenario and the papers' Talos anchor."""
    rows = []
    targets = [(str(ANCHOR_JSON), "anchor(json)", ANCHOR_SPECS)] if ANCHOR_JSON.is_file() else []
    for name in registry.names():
        if registry.is_available(name):
            targets += [(name, s, s) for s in load_robot(name).scenarios]
    agree = 0
    results = count_rows([(f"{r}/{label}", r, c) for r, label, c in targets], DELASSUS, choose=True)
    for (spec, label, _), counts in zip(targets, results):
        chosen = counts.pop("-a auto")
        best = min(counts, key=counts.get)
        agree += chosen == best
        rows.append([load_robot(spec).name, label, *counts.values(), best, chosen])
    write("registry", rows, ["robot", "scenario", *DELASSUS, "cheapest", "-a auto"],
          "Λ⁻¹ instructions on the registry robots")
    print(f"-a auto chose the cheapest algorithm of the table on {agree}/{len(rows)} scenarios")


STUDIES = {"stem": study_stem, "kchain": study_kchain, "allchain": study_allchain, "feet": study_feet,
           "registry": study_registry}

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer sizes")
    p.add_argument("--study", action="append", choices=list(STUDIES))
    p.add_argument("--jobs", type=int, default=None, help="local processes (default: every core; 1: this process)")
    args = p.parse_args()
    JOBS["workers"] = args.jobs
    for s in args.study or list(STUDIES):
        t0 = time.perf_counter()
        print(f"== {s}")
        STUDIES[s](args.quick)
        print(f"({time.perf_counter() - t0:.0f} s)")
