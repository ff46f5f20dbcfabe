"""Where the contact step's matrix-free linear solve (codegen/contact_step.py ``linear_solve``) becomes
cheaper than G's dense LDLᵀ: Talos at talos_stand's state with k points per sole (a k/2 × 2 grid
over the sole's 0.2 × 0.1 m, both soles: m = 6k rows), go1 with 1 and 3 points per foot.  Per
case: the instructions of one refactorization and one solve of each route, the count ``auto``
compares (5 iterations, 2 refactorizations, the matrix-free q stage by what it adds to prep), the
route it picks, and the measured µs per step of both routes (ADMM, tolerance 1e-8, thread CPU
time over a batch of copies on one thread, median of interleaved rounds).

    taskset -c 0 .venv/bin/python bench/contact_linear_solve.py [--reps 7] [--calls 1000] [--time-up-to 48]

Writes bench/results/contact_linear_solve.md."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import common
from casadi_delassus import contact_step
from casadi_delassus.codegen.contact_step import delassus_function, linear_solve_costs
from casadi_delassus.contact import step as st
from casadi_delassus.contact.delassus_operator import OPERATORS
from casadi_delassus.model import load_robot
from casadi_delassus.opcount import count_ops
from casadi_delassus.verify import contact_problems as cp

def sole_points(k):
    """k points on a sole: a (k/2) × 2 grid over x ∈ [-0.1, 0.1], y = ±0.05 (k = 4: the corners)."""
    return [(x, y, 0.0) for x in np.linspace(-0.1, 0.1, k // 2) for y in (0.05, -0.05)]


def cases():
    """(label, problem whose state is used, contact specs)."""
    talos, go1 = cp.build("talos_stand"), cp.build("go1_stand")
    out = [("go1, 1 per foot", go1, go1.specs)]
    out.append(("go1, 3 per foot", go1, [s2 for s in go1.specs for s2 in _three(s)]))
    for k in (2, 4, 8, 16):
        out.append((f"talos, {k} per sole", talos,
                    [cp.spec(link, p) for link in ("left_sole_link", "right_sole_link") for p in sole_points(k)]))
    return out


def _three(spec):
    link, point = spec.split(":3d-world@")
    x, y, z = map(float, point.split(","))
    return [spec, cp.spec(link, (x + 0.01, y, z)), cp.spec(link, (x, y + 0.01, z))]


def counts(robot, specs):
    """(dense factor, dense solve, matrix-free factor, matrix-free solve, auto's costs, auto's route)."""
    cs = st.check_contacts(robot, specs)
    n = lambda f: count_ops(f)["instructions"]     # noqa: E731
    trace = st.step_trace(robot, cs, delassus_function(robot, cs, "auto")[1])
    operators = {route: op(robot, cs, "b") for route, op in OPERATORS.items()}
    costs = linear_solve_costs(operators, {r: st.prep_function(trace, "b", op) for r, op in operators.items()})
    dense, free = operators["dense"], operators["matrix_free"]
    return n(dense.factor), n(dense.solve), n(free.factor), n(free.solve), costs, min(costs, key=costs.get)


def per_step(s, p, calls):
    """Thread CPU µs per step over a batch of ``calls`` copies of p's state, one thread."""
    Q, V, T = (np.tile(x, (calls, 1)) for x in (p.q, p.v, p.tau))
    t0 = time.thread_time()
    r = s(Q, V, T, dt=p.dt, tol=1e-8, max_iter=10_000, threads=1)
    assert np.all(np.asarray(r.status) == "converged")
    return (time.thread_time() - t0) / calls * 1e6, int(np.median(r.iterations))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--time-up-to", type=int, default=48, help="compile and time the cases up to this m")
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    rows = ["| case | m | dense: factor / solve | matrix-free: re-damp / apply | auto's count dense / matrix-free | "
            "auto | µs per step dense / matrix-free (iterations) |", "|---|---|---|---|---|---|---|"]
    for label, p, specs in cases():
        robot = load_robot(p.robot)
        f, s, mf, ms, costs, route = counts(robot, specs)
        m = 3 * len(specs)
        timed = "not timed"
        if m <= args.time_up_to:
            steps = {r: contact_step(p.robot, specs, solver="admm", mu=0.8, out_dir=args.out, linear_solve=r)
                     for r in ("dense", "matrix_free")}
            rounds = {r: [] for r in steps}
            for _ in range(args.reps):              # interleaved rounds
                for r, step in steps.items():
                    rounds[r].append(per_step(step, p, args.calls))
            med = {r: statistics.median(t for t, _ in v) for r, v in rounds.items()}
            its = {r: v[0][1] for r, v in rounds.items()}
            timed = f"{med['dense']:.2f} ({its['dense']}) / {med['matrix_free']:.2f} ({its['matrix_free']})"
        rows.append(f"| {label} | {m} | {f:,} / {s:,} | {mf:,} / {ms:,} | {costs['dense']:,} / {costs['matrix_free']:,}"
                    f" | {route} | {timed} |")
        print(rows[-1], flush=True)
    text = ("# ADMM's linear solve in the contact step: dense LDLᵀ against the matrix-free damped inverse\n\n"
            f"`taskset -c 0 .venv/bin/python bench/contact_linear_solve.py --reps {args.reps} --calls {args.calls} "
            f"--time-up-to {args.time_up_to}`; instructions per call (CasADi's count); µs: ADMM at tolerance 1e-8, "
            f"median of {args.reps} interleaved rounds of {args.calls} steps (thread CPU time).\n\n" + "\n".join(rows) + "\n")
    common.publish("contact_linear_solve.md", text)


if __name__ == "__main__":
    main()
