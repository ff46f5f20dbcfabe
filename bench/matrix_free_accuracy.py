"""Accuracy of the matrix-free operators and their explicit baselines on the matrix-free
paper's scenarios (../shared/papers/001_a194bdf892a0cc2c.txt, Table I): the traced
casadi.Function evaluated numerically (no compiler), whole and re-evaluated by stages
(codegen/staging.py: factor(q) | [damping(R) |] apply(lam)), on random (q, λ, R), against

- the NumPy oracle (check.ORACLES: reference.delassus(q) @ λ and the dense damped inverse),
- Pinocchio's ``ConstraintCholeskyDecomposition``: ``getDelassusOperatorCholeskyExpression()``
  ``@ λ`` and, with the damping μ = 1/R (our R is the paper's stiffness), ``.solve(a)``.
  URDF robots are read by Pinocchio itself; Cassie (SDF), the boxes and the swimmer are
  built from our tree (pinocchio_oracle.model_from_robot).

Errors are relative to the largest entry of the oracle's result (check.relative_error).

    .venv/bin/python bench/matrix_free_accuracy.py [--samples 100] [--tol 1e-9]

Writes bench/results/matrix_free_accuracy.md and .csv; exits 1 if an error exceeds --tol.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from common import write

from casadi_delassus.verify import pinocchio_oracle as oracle
from casadi_delassus.verify.check import ORACLES, relative_error
from casadi_delassus.codegen import staging
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import load_robot

SCENARIOS = [("Go2 standing", "go2", "4F3"), ("G1 standing", "g1", "8F3"), ("G1 fallen", "g1", "fallen"),
             ("Cassie loops", "cassie", "loops"), ("Cassie loops + feet", "cassie", "loops+2F"),
             ("Box stack", "boxes:n=10", "default"), ("Box pyramid", "pyramid:layers=3", "default"),
             ("Swimmer 10", "swimmer:n=10", "default")]
OPERATORS = ("delassus_apply", "damped_inverse_apply", "delassus_explicit_apply", "damped_inverse_explicit")


def pinocchio_result(algorithm, model, data, cms, x):
    if algorithm.startswith("delassus"):
        return oracle.delassus_expression(model, data, cms, x["q"], 0.0)[0] @ x["lam"]
    return oracle.delassus_expression(model, data, cms, x["q"], 1.0 / x["R"])[0].solve(x["lam"])


def measure(robot, cs, algorithm, samples, rng, pin_case):
    """Worst relative errors of the whole function and of its stages, against NumPy and Pinocchio."""
    f, _, _ = trace(robot, cs, algorithm)
    stages = staging.split(f, staging.algorithm_stages(algorithm, list(f.name_in())))
    worst = {"numpy": 0.0, "staged": 0.0, "pinocchio": 0.0}
    for _ in range(samples):
        x = {"q": robot.random_q(rng), "K": {}, "lam": rng.normal(size=cs.m), "R": rng.uniform(0.1, 10.0, cs.m)}
        whole = np.asarray(f(**{n: x[n] for n in f.name_in()})[algorithm]).ravel()
        staged = staging.evaluate(stages, x)["apply"][algorithm].ravel()
        want = ORACLES[algorithm](robot, cs, x)
        worst["numpy"] = max(worst["numpy"], relative_error(whole, want))
        worst["staged"] = max(worst["staged"], relative_error(staged, want))
        if pin_case:
            worst["pinocchio"] = max(worst["pinocchio"], relative_error(whole, pinocchio_result(algorithm, *pin_case, x)))
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows = []
    for name, spec, scenario in SCENARIOS:
        robot = load_robot(spec)
        cs = ConstraintSet.parse(robot, robot.scenarios[scenario])
        model = oracle.model_for(robot)
        pin_case = (model, model.createData(), oracle.constraint_models(model, robot, cs))
        for algorithm in OPERATORS:
            t0 = time.perf_counter()
            w = measure(robot, cs, algorithm, args.samples, np.random.default_rng(args.seed), pin_case)
            rows.append([name, robot.nv, cs.m, algorithm, args.samples, w["numpy"], w["staged"], w["pinocchio"],
                         "yes" if max(w.values()) <= args.tol else "NO"])
            print(f"{name}: {algorithm} numpy {w['numpy']:.1e}, staged {w['staged']:.1e}, pinocchio "
                  f"{w['pinocchio']:.1e} ({time.perf_counter() - t0:.0f} s)", flush=True)
    write("matrix_free_accuracy", rows,
          ["scenario", "nv", "m", "operator", "samples", "vs NumPy", "staged vs NumPy", "vs Pinocchio",
           f"<= {args.tol:g}"],
          f"Matrix-free operators and explicit baselines: worst relative error over {args.samples} random (q, λ, R)")
    return 0 if all(r[-1] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
