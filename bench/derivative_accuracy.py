"""Accuracy of every algorithm's derivatives (issue 14, done-when 1): JVPs, VJPs and (dynamics
solvers, aba, rnea, operators) Jacobians against finite differences of the value function on
the manifold, and the JVP/VJP dot-product test, on go1 4F3, talos 2F, the ladder and Cassie's
loops, wherever the algorithm accepts the scenario.

    python bench/derivative_accuracy.py [--samples 20] [--case go1/4F3 ...] [-a ALGO ...]
    python bench/derivative_accuracy.py --pinocchio [--case go1/4F3 ...]      # done-when 2
    python bench/derivative_accuracy.py --dot-study 300 --case ladder:rungs=4/default -a pv_early

The second form compares the Jacobians of rnea, aba, pv, pv_early and ltl with Pinocchio's
analytical derivatives instead (verify/derivative_oracle.py; default cases go1 4F3, talos 2F,
panda EE6: 3D and 6D contacts, floating and fixed base) and writes
bench/results/derivative_pinocchio.md.  The third runs the dot-product test alone over many
points, the default derivatives beside CasADi's AD where they differ (pv_early), and writes
bench/results/derivative_dot_study.md.

The functions are traced and evaluated by CasADi (the expressions the generated C computes,
without compiling hundreds of functions); tests/codegen/test_derivatives.py compiles some and checks
them the same way.  The rules (finite-difference steps, tolerances, pv_early's and
pv_osim_fast's redrawn points, the two dot-product measures) are verify/derivatives.py's.  Writes bench/results/derivative_accuracy.md/.csv.
"""
from __future__ import annotations

import argparse
import time

from common import write

from casadi_delassus import load_robot
from casadi_delassus.api import constraint_set
from casadi_delassus.codegen.derivatives import trace_derivative
from casadi_delassus.codegen.trace import trace
from casadi_delassus.errors import ConstraintError
from casadi_delassus.opcount import count_ops
from casadi_delassus.registry import ALGORITHMS, delassus_algorithms
from casadi_delassus.verify.derivative_oracle import ORACLE_WRT, PIN_TOL, pinocchio_errors
from casadi_delassus.verify.derivatives import (DOT_TOL, FD_TOL, PIVOT_MIN, Checkable, compare_derivatives, dot_errors,
                                                dot_products, evaluate)

CASES = ["go1/4F3", "talos/2F", "ladder:rungs=4/default", "cassie/loops"]
PINOCCHIO_CASES = ["go1/4F3", "talos/2F", "panda/EE6"]


CANCELS = 1e-2     # an inner product this much smaller than ‖ẏ‖‖ȳ‖ has lost that many digits to cancellation


def cancels_within_rounding(product):
    """Whether one point's (a, b, ‖ẏ‖‖ȳ‖) passes the dot test: |a − b| ≤ DOT_TOL max(|a|, |b|), or,
    where a and b are sums whose terms cancel (max(|a|, |b|) < CANCELS ‖ẏ‖‖ȳ‖), |a − b| ≤ DOT_TOL ‖ẏ‖‖ȳ‖:
    rounding in the terms, not a disagreement of the JVP and the VJP."""
    a, b, scale = product
    big = max(abs(a), abs(b))
    return abs(a - b) <= DOT_TOL * big or big < CANCELS * scale and abs(a - b) <= DOT_TOL * scale


def scenarios(specs):
    """(spec, robot, constraint set) for each "robot/scenario" spec."""
    for spec in specs:
        name, scenario = spec.rsplit("/", 1)
        robot = load_robot(name)
        yield spec, robot, constraint_set(robot, scenario)[0]


def worst(results):
    name = max(results, key=lambda k: results[k].error)
    return name, results[name].error


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--case", action="append", dest="cases")
    p.add_argument("-a", "--algorithm", action="append", dest="algorithms")
    p.add_argument("--pinocchio", action="store_true", help="Jacobians against Pinocchio's derivatives instead")
    p.add_argument("--dot-study", type=int, metavar="N",
                   help="the dot-product test alone over N points (seed 1), method auto beside method ad where they differ")
    args = p.parse_args()
    if args.dot_study:
        return dot_study(args.cases or CASES, args.algorithms or list(ALGORITHMS), args.dot_study)
    if args.pinocchio:
        return against_pinocchio(args.cases or PINOCCHIO_CASES, args.algorithms or list(ORACLE_WRT), args.samples)
    rows, failures = [], []
    for spec, robot, cs in scenarios(args.cases or CASES):
        for algo in args.algorithms or list(ALGORITHMS):
            if not ALGORITHMS[algo].accepts(cs):
                continue
            t0 = time.perf_counter()
            try:
                value = trace(robot, cs, algo)[0]
            except ConstraintError as exc:          # e.g. redundant rows for the hard solvers
                print(f"{spec} {algo}: refused ({exc})", flush=True)
                continue
            modes = ["jvp", "vjp"] + ([] if algo in delassus_algorithms() else ["jacobian"])
            made = {m: Checkable.traced(trace_derivative(robot, cs, algo, m)) for m in modes}
            skipped = []
            results = dict(zip(modes, compare_derivatives([made[m] for m in modes], value, robot, cs, args.samples,
                                                          skipped=skipped)))
            products = dot_products(made["jvp"], made["vjp"], robot, cs, args.samples, value=value)
            dot, dot_rounding = dot_errors(products)
            base = count_ops(value)["instructions"]
            ratios = {m: round(count_ops(made[m].function)["instructions"] / base, 2) for m in modes}
            errs = {m: worst(results[m]) for m in modes}
            fd_ok = all(e <= FD_TOL for _, e in errs.values())
            result = ("ok" if dot <= DOT_TOL else "ok*" if all(map(cancels_within_rounding, products)) else "FAIL") \
                if fd_ok else "FAIL"
            if result == "FAIL":
                failures.append(f"{spec} {algo}")
            rows.append([spec, algo, base, ratios["jvp"], ratios["vjp"], ratios.get("jacobian", "—"),
                         *(f"{errs[m][1]:.1e} ({errs[m][0]})" if m in errs else "—" for m in ("jvp", "vjp", "jacobian")),
                         f"{dot:.1e}", f"{dot_rounding:.1e}", len(skipped), result, round(time.perf_counter() - t0, 1)])
            print(rows[-1], flush=True)
    write("derivative_accuracy", rows,
          ["case", "algorithm", "value instructions", "jvp ×", "vjp ×", "jacobian ×",
           f"jvp vs FD ({args.samples} points)", "vjp vs FD", "jacobian vs FD", "dot test", "dot test / ‖ẏ‖‖ȳ‖",
           f"points redrawn (conditioning < {PIVOT_MIN:g})",
           "result", "s"],
          f"Derivatives against finite differences on the manifold (≤ {FD_TOL:g}) and the dot-product test "
          f"(|a − b| / max(|a|, |b|) ≤ {DOT_TOL:g}; |a − b| / ‖ẏ‖‖ȳ‖ reported beside it), {args.samples} random points "
          f"each.  ok*: every point within {DOT_TOL:g} on the first measure or, where the inner product cancels "
          f"(max(|a|, |b|) < {CANCELS:g} ‖ẏ‖‖ȳ‖), on the second")
    print("failures:", failures or "none")


def dot_study(cases, algorithms, samples):
    """How many of ``samples`` points (seed 1, the value's conditioning rule) exceed DOT_TOL on the
    relative measure, with both measures' worst, for the default derivatives ("auto") and, where
    they differ from it, CasADi's AD through the algorithm ("ad": pv_early's implicit-function
    JVP/VJP against AD through its elimination order)."""
    rows = []
    for spec, robot, cs in scenarios(cases):
        for algo in algorithms:
            if not ALGORITHMS[algo].accepts(cs):
                continue
            value = trace(robot, cs, algo)[0]
            for method in ("auto", "ad"):
                pair = [Checkable.traced(trace_derivative(robot, cs, algo, m, method=method)) for m in ("jvp", "vjp")]
                products = dot_products(*pair, robot, cs, samples, seed=1, value=value)
                above = sum(abs(a - b) > DOT_TOL * max(abs(a), abs(b)) for a, b, _ in products)
                rel, rounding = dot_errors(products)
                used = ",".join(sorted(set(pair[0].record["method"].values())))
                rows.append([spec, algo, used, above, f"{rel:.1e}", f"{rounding:.1e}"])
                print(rows[-1], flush=True)
                if used == "ad":                            # auto was AD already: nothing to set beside it
                    break
    write("derivative_dot_study", rows, ["case", "algorithm", "method", f"points above {DOT_TOL:g} (relative)",
                                         "worst |a − b| / max(|a|, |b|)", "worst |a − b| / ‖ẏ‖‖ȳ‖"],
          f"The dot-product test alone over {samples} random points (seed 1; pv_early's and pv_osim_fast's "
          f"ill-conditioned points redrawn)")


def against_pinocchio(cases, algorithms, samples):
    rows, failures = [], []
    for spec, robot, cs in scenarios(cases):
        for algo in algorithms:
            jacobian = trace_derivative(robot, cs, algo, "jacobian", ORACLE_WRT[algo])[0]
            worst, k_err = pinocchio_errors(lambda x: evaluate(jacobian, x), robot, cs, algo, samples)
            ok = max(worst.values()) <= PIN_TOL and k_err <= 1e-12
            if not ok:
                failures.append(f"{spec} {algo}")
            rows.append([spec, algo, f"{max(worst.values()):.1e}", ", ".join(f"{n} {e:.1e}" for n, e in worst.items()),
                         f"{k_err:.1e}" if "k" in ORACLE_WRT[algo] else "", "ok" if ok else "FAIL"])
            print(rows[-1], flush=True)
    write("derivative_pinocchio", rows, ["case", "algorithm", "worst", "per Jacobian", "k₀ vs oracle", "result"],
          f"Jacobians (codegen/derivatives.py, analytical blocks) against Pinocchio's derivatives ({samples} random "
          f"(q, v, τ); max |ours − Pinocchio| / max(1, |Pinocchio|) ≤ {PIN_TOL:g})")
    print("failures:", failures or "none")


if __name__ == "__main__":
    main()
