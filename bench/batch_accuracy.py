"""Batched results against single calls, on bigger cases than the tests compile: for each
scenario and algorithm, N random inputs evaluated as one batch (``f(Q, …)``) and one by one
(``f(q, …)``).  Reports per output the largest relative difference (max-norm of the
instance's output), the same for the single call under a one-ulp change of q (what rounding
alone moves the function by: the floor any other evaluation order, the batch's included,
can be held to), and whether the batch is bit-identical on 1, 2 and 3 threads and when each
instance is evaluated alone.

    .venv/bin/python bench/batch_accuracy.py [-c go1/4F3:pv_osimr,pv_early …] [--samples 64]

writes bench/results/batch_accuracy.md.
"""
from __future__ import annotations

import argparse

import numpy as np

import common  # noqa: F401
from common import write

import casadi_delassus as cd

# scenario -> algorithms: a Delassus function (the cheapest), the dynamics solvers (hard,
# pivoted, soft), ABA, a matrix-free operator
CASES = {
    "go1/4F3": ["auto", "naive", "pv_early", "pv", "ltl_soft", "aba", "delassus_apply"],
    "talos/2F": ["auto", "pv_early", "ltl_soft", "delassus_apply"],
    "cassie/loops": ["auto", "delassus_apply", "damped_inverse_apply"],
    "ladder:rungs=4/default": ["auto", "pv_early", "ltl_soft"],
}


def inputs(f, n, rng):
    """{name: (n, *shape)}: random q, v, τ, k, λ, accelerations; R a compliance in [0.1, 1]."""
    Q = np.array([f.robot.random_q(rng) for _ in range(n)])
    out = {"q": Q}
    for spec in f.inputs[1:]:
        shape = (n, *spec["shape"])
        out[spec["name"]] = rng.uniform(0.1, 1.0, shape) if spec["name"] == "R" else rng.normal(size=shape)
    return out


def per_instance(a, b):
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    return np.abs(a - b).max(1) / np.maximum(np.abs(b).max(1), 1e-300)


def check(scenario, algorithm, samples, seed=0):
    robot, scen = scenario.rsplit("/", 1)
    f = cd.generate(robot, scen, algorithm)
    rng = np.random.default_rng(seed)
    x = inputs(f, samples, rng)
    batch = f.outputs(**x, threads=1)
    single = [f.outputs(**{k: v[i] for k, v in x.items()}) for i in range(samples)]
    nudged = dict(x, q=x["q"] * (1 + np.finfo(float).eps * rng.choice([-1.0, 1.0], size=x["q"].shape)))
    moved = f.outputs(**nudged, threads=1)
    identical = all(np.array_equal(f.outputs(**x, threads=t)[k], batch[k]) for t in (2, 3) for k in batch)
    alone = all(np.array_equal(f.outputs(**{k: v[i:i + 1] for k, v in x.items()})[o][0], batch[o][i])
                for i in range(0, samples, max(1, samples // 8)) for o in batch)
    rows = []
    for o in batch:
        s = np.array([r[o] for r in single])
        d, u = per_instance(batch[o], s), per_instance(moved[o], batch[o])
        rows.append([scenario, f"{algorithm}→{f.manifest['auto']['chosen']}" if "auto" in f.manifest else algorithm, o,
                     f"{f.manifest['batch']['lanes']} {f.manifest['batch']['isa']}", float(d.max()), float(np.median(d)),
                     float(u.max()), int((d <= 1e-14).sum()), samples, "yes" if identical and alone else "NO"])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-c", "--case", action="append", help="scenario:algo,algo (default: CASES)")
    ap.add_argument("--samples", type=int, default=64)
    args = ap.parse_args()
    cases = dict(c.rsplit(":", 1) for c in args.case) if args.case else {k: ",".join(v) for k, v in CASES.items()}
    rows = []
    for scenario, algos in cases.items():
        for a in algos.split(","):
            print(f"{scenario} {a} ...", flush=True)
            rows += check(scenario, a, args.samples)
    write("batch_accuracy", rows, ["scenario", "algorithm", "output", "lanes", "batch vs single (max)",
                                   "median", "single, q moved 1 ulp (max)", "≤ 1e-14", "of",
                                   "bit-identical (threads 1/2/3, alone)"],
          title="Batched vs single calls: relative difference per instance")


if __name__ == "__main__":
    main()
