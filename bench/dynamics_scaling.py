"""Operation counts of the constrained-dynamics solvers as mechanisms grow (PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Fig. 4): fixed-base chains of 6…100 revolute links
with the tip welded (Fig. 4a, m = 6), and the ladder (Fig. 4b/c: rungs of 7 links branching off
a rail every 3 links, every rung's end welded to the world, m = 6 · rungs ~ n).  Counts are the
traced SX Function's instructions (with cse), as everywhere in this package; fitted slopes of
log(instructions) against log(n) (chains) and log(m) (ladder) over the larger half of each
sweep are printed next to the paper's claims: PV-early and PV-soft linear; PV cubic in m on the
ladder; the LTL solvers superlinear.

    .venv/bin/python bench/dynamics_scaling.py [--quick]

Writes bench/results/dynamics_scaling_chain.{md,csv,png}, dynamics_scaling_ladder.{md,csv,png}
and dynamics_scaling_slopes.{md,csv}.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from common import instructions, save_figure, slope, write

from casadi_delassus import load_robot
from casadi_delassus.api import constraint_set

ALGOS = ["pv", "pv_early", "pv_soft", "ltl", "ltl_soft", "aba"]
LTL_MAX_RUNGS = 12
COLORS = {"pv": "C0", "pv_early": "C1", "pv_soft": "C2", "ltl": "C3", "ltl_soft": "C4", "aba": "0.5"}


def counts(spec, algos=ALGOS):
    robot = load_robot(spec)
    cs, _ = constraint_set(robot, "default")
    out = {}
    for a in algos:
        t0 = time.perf_counter()
        out[a] = instructions(robot, cs, a)
        out[a + "_s"] = time.perf_counter() - t0
    return robot, cs, out


def plot(name, x, series, xlabel, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for a, y in series.items():
        ax.plot([e for e, f in zip(x, y) if f is not None], [f for f in y if f is not None], marker="o", ms=3, color=COLORS[a], label=f"{a} (slope {slope(x, y, larger_half=True):.2f})",
                ls="--" if a == "aba" else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("instructions (SX ops, cse)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, f"{name}.png")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller mechanisms")
    args = ap.parse_args(argv)
    chain_n = [6, 10, 20, 40] if args.quick else [6, 8, 10, 15, 20, 30, 40, 50, 70, 100]
    rungs = [1, 2, 3, 4] if args.quick else [1, 2, 3, 4, 6, 8, 10, 12, 16, 20]
    hdr = ["n (nv)", "m", *ALGOS, "trace s"]

    rows, chain = [], {a: [] for a in ALGOS}
    for n in chain_n:
        robot, cs, c = counts(f"chain:n={n}")
        rows.append([robot.nv, cs.m, *(c[a] for a in ALGOS), round(sum(c[a + "_s"] for a in ALGOS), 1)])
        for a in ALGOS:
            chain[a].append(c[a])
        print(rows[-1], flush=True)
    write("dynamics_scaling_chain", rows, hdr, "Fixed-base chains, tip welded (m = 6): instructions (PV paper Fig. 4a)")
    plot("dynamics_scaling_chain", chain_n, chain, "links n", "Chains with a welded tip (m = 6)")

    rows, ladder, ms = [], {a: [] for a in ALGOS}, []
    for r in rungs:
        # the LTL solvers' SX graphs pass 10⁶ nodes beyond 12 rungs: PV's cubic term is measured further
        algos = ALGOS if r <= LTL_MAX_RUNGS else [a for a in ALGOS if not a.startswith("ltl")]
        robot, cs, c = counts(f"ladder:rungs={r}", algos)
        ms.append(cs.m)
        rows.append([robot.nv, cs.m, *(c.get(a, "") for a in ALGOS), round(sum(c[a + "_s"] for a in algos), 1)])
        for a in ALGOS:
            ladder[a].append(c.get(a))
        print(rows[-1], flush=True)
    write("dynamics_scaling_ladder", rows, hdr, "Ladder (rungs of 7 links every 3 rail links, rung ends welded; "
          "n = 10·rungs, m = 6·rungs): instructions (PV paper Fig. 4c)")
    plot("dynamics_scaling_ladder", ms, ladder, "constraints m (= 0.6 n)", "Ladder: m ~ n")

    claims = {"pv": ("linear in n", "cubic in m"), "pv_early": ("linear", "linear"), "pv_soft": ("linear", "linear"),
              "ltl": ("superlinear (O(nd²): cubic for a chain)", "superlinear"),
              "ltl_soft": ("superlinear (O(nd²))", "superlinear"), "aba": ("linear", "linear")}
    # the part of PV above the linear PV-early on the ladder: the O(m²d + m³) of L^A and its LDLᵀ
    excess = [p - e for p, e in zip(ladder["pv"], ladder["pv_early"])]
    srows = [[a, round(slope(chain_n, chain[a], True), 2), round(slope(ms, ladder[a], True), 2), *claims[a]] for a in ALGOS]
    srows.append(["pv − pv_early", round(slope(chain_n, [p - e for p, e in zip(chain["pv"], chain["pv_early"])], True), 2),
                  round(slope(ms, excess, True), 2), "", "the superlinear part of PV: m²d + m³ (d ~ m here)"])
    # PV on the ladder as c1·m + c2·m² + c3·m³ (n ∝ m, d ∝ m): how much of it the cubic term explains
    m_ = np.asarray(ms, float)
    A = np.column_stack([m_, m_ ** 2, m_ ** 3])
    coef, *_ = np.linalg.lstsq(A, np.asarray(ladder["pv"], float), rcond=None)
    fit = A @ coef
    worst = float(np.max(np.abs(fit - ladder["pv"]) / ladder["pv"]))
    share = float(coef[2] * m_[-1] ** 3 / ladder["pv"][-1])
    local = float(np.log(ladder["pv"][-1] / ladder["pv"][-2]) / np.log(m_[-1] / m_[-2]))
    local_excess = float(np.log(excess[-1] / excess[-2]) / np.log(m_[-1] / m_[-2]))
    srows.append(["pv (ladder fit)", "", round(local, 2), "",
                  f"pv ≈ {coef[0]:.0f}·m {coef[1]:+.2f}·m² {coef[2]:+.3f}·m³ (max rel. misfit {worst:.2f}); the m³ "
                  f"term is {100 * share:.0f}% of pv at m = {int(m_[-1])}; local slope between the last two sizes "
                  f"(pv − pv_early: {local_excess:.2f})"])
    write("dynamics_scaling_slopes", srows, ["algorithm", "slope vs n (chains)", "slope vs m (ladder)",
                                             "paper: chains", "paper: ladder"],
          "Fitted log-log slopes (larger half of each sweep)")


if __name__ == "__main__":
    main()
