"""Accuracy of the soft Gauss solvers against the soft weight (PV paper
../shared/papers/004_52dd6d88d839fc14.txt, Fig. 3): Talos with both feet and both hands welded
(scenario 2F+2H, m = 24), random (q, v, τ), k = 0; for each weight w = R⁻¹ (the same on every
row; R is the generated function's compliance input) the constraint residual ‖J v̇ + J̇ v − k‖₂
of pv_soft and ltl_soft (Fig. 3a, with the hard solvers pv, pv_early and ltl for reference) and
the distance ‖v̇_soft − v̇_pv‖₂ to the hard solution of pv (Fig. 3b).  The traced casadi.Functions
are evaluated numerically (double precision, as the compiled C).

    .venv/bin/python bench/soft_weights.py [--samples 1000] [--robot talos --scenario 2F+2H]

Writes bench/results/soft_weights.{md,csv,png}.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from common import save_figure, write

from casadi_delassus import load_robot
from casadi_delassus.verify import reference as ref
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.trace import trace

WEIGHTS = [10.0 ** e for e in range(0, 15)]
SOFT, HARD = ["pv_soft", "ltl_soft"], ["pv", "pv_early", "ltl"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--robot", default="talos")
    ap.add_argument("--scenario", default="2F+2H")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    robot = load_robot(args.robot)
    cs, _ = constraint_set(robot, args.scenario)
    fs = {a: trace(robot, cs, a)[0] for a in SOFT + HARD}
    rng = np.random.default_rng(0)
    res = {(a, w): [] for a in SOFT for w in WEIGHTS}
    dist = {(a, w): [] for a in SOFT for w in WEIGHTS}
    hard_res = {a: [] for a in HARD}
    k = np.zeros(cs.m)
    for _ in range(args.samples):
        q, v, tau = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        J, drift = ref.constraint_jacobian(robot, cs, q), ref.constraint_drift(robot, cs, q, v)
        hard = {}
        for a in HARD:
            hard[a] = np.array(fs[a](q=q, v=v, tau=tau, k=k)["vdot"]).ravel()
            hard_res[a].append(np.linalg.norm(J @ hard[a] + drift - k))
        for w in WEIGHTS:
            R = np.full(cs.m, 1.0 / w)
            for a in SOFT:
                vd = np.array(fs[a](q=q, v=v, tau=tau, k=k, R=R)["vdot"]).ravel()
                res[(a, w)].append(np.linalg.norm(J @ vd + drift - k))
                dist[(a, w)].append(np.linalg.norm(vd - hard["pv"]))
    rows = []
    for w in WEIGHTS:
        for a in SOFT:
            r, d = np.array(res[(a, w)]), np.array(dist[(a, w)])
            rows.append([f"{w:.0e}", a, float(np.median(r)), float(r.max()), float(np.median(d)), float(d.max())])
    for a in HARD:
        r = np.array(hard_res[a])
        rows.append(["hard", a, float(np.median(r)), float(r.max()), "", ""])
    write("soft_weights", rows, ["weight R⁻¹", "solver", "median ‖J v̇ + J̇v − k‖", "max ‖J v̇ + J̇v − k‖",
                                 "median ‖v̇ − v̇_pv‖", "max ‖v̇ − v̇_pv‖"],
          f"{args.robot} {args.scenario}: soft solvers against the soft weight, {args.samples} random samples, "
          f"k = 0 (PV paper Fig. 3; {time.perf_counter() - t0:.0f} s)")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    pos = np.log10(WEIGHTS)
    for ax, data, title in ((axes[0], res, "(a) constraint residual ‖J v̇ + J̇ v − k‖₂"),
                            (axes[1], dist, "(b) ‖v̇_soft − v̇_pv‖₂ (distance to the hard solution)")):
        for j, a in enumerate(SOFT):
            bp = ax.boxplot([np.maximum(data[(a, w)], 1e-300) for w in WEIGHTS], positions=pos + (j - 0.5) * 0.3,
                            widths=0.25, patch_artist=True, showfliers=True, flierprops={"markersize": 2})
            for box in bp["boxes"]:
                box.set_facecolor(f"C{j + 2}")
            ax.plot([], [], color=f"C{j + 2}", lw=6, label=a)
        if data is res:
            for j, a in enumerate(HARD):
                ax.axhline(np.median(hard_res[a]), color=f"C{[0, 1, 3][j]}", ls="--", lw=1,
                           label=f"{a} (hard, median)")
        ax.set_yscale("log")
        ax.set_xticks(pos)
        ax.set_xticklabels([f"1e{int(p)}" for p in pos], fontsize=7)
        ax.set_xlabel("soft weight R⁻¹")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{args.robot} {args.scenario}, {args.samples} random configurations")
    fig.tight_layout()
    save_figure(fig, "soft_weights.png")


if __name__ == "__main__":
    main()
