"""Table I of the matrix-free paper (../shared/papers/001_a194bdf892a0cc2c.txt, Sec. VI-B):
the matrix-free Delassus operator Λ⁻¹λ (delassus_apply) and damped inverse Λ_R a
(damped_inverse_apply) against the explicit route (delassus_explicit_apply: the cheapest
explicit Λ⁻¹ then the product; damped_inverse_explicit: that Λ⁻¹ + diag(1/R), LDLᵀ and two
solves), whole and re-evaluated by stages (codegen/staging.py): a new vector re-runs `apply`,
a new damping `damping` + `apply` (the paper's Λ⁻¹, Λ_R and Λ'_R re-evaluation columns).

For every scenario: op counts (instructions, with cse) of each function and stage; compiled
run time, µs per call, median of --reps repetitions interleaved across all functions of the
scenario, by the C harness of casadi_delassus.timing (CHarness, what time_c runs); CasADi's
work arrays (sz_w doubles and bytes) and the stored intermediates between stages.  The
staged result and the whole function are checked against the NumPy oracle on sample 0.

Compiler flags: the package's "auto" policy, except that functions above 20k instructions get
-Og instead of -O1/-O0 (LEVELS): the explicit routes are mostly such functions, and -O0 would
make them ~4x slower than they need be (damped_inverse_explicit on swimmer:n=10, 68k
instructions: -O0 88 µs, -Og 21 µs, -O1 18 µs, -O2 29 µs; gcc 12 took 3 s, 22 s, 83 s, 107 s).
Code goes to its own cache folder (codegen_out/_table1) since the package's hash does not
cover this policy.  Functions above MAX_COMPILE instructions are counted, not compiled.

    .venv/bin/python bench/table1.py                       # every scenario (tens of minutes)
    .venv/bin/python bench/table1.py -s go2/4F3 --reps 7    # one scenario

Writes results/table1.md/.csv (µs and ratios matrix-free / explicit), table1_ops.md/.csv
(instructions and ratios), table1_stages.md/.csv (every function and stage) and table1.png.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import casadi as ca
import numpy as np
from common import RESULTS, write

from casadi_delassus import api, timing
from casadi_delassus.codegen import build
from casadi_delassus.registry import explicit_delassus
from casadi_delassus.verify.check import ORACLES, relative_error
from casadi_delassus.codegen import staging
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.errors import DelassusError
from casadi_delassus.model import load_robot

SCENARIOS = [("Go2 standing", "go2", "4F3"), ("G1 standing", "g1", "8F3"), ("G1 fallen", "g1", "fallen"),
             ("Cassie", "cassie", "loops"), ("Box stack", "boxes:n=30", "default"),
             ("Box pyramid", "pyramid:layers=3", "default"), ("Swimmer 10", "swimmer:n=10", "default"),
             ("Swimmer 30", "swimmer:n=30", "default")]
# (operator, matrix-free algorithm, explicit algorithm)
OPERATORS = [("Λ⁻¹λ", "delassus_apply", "delassus_explicit_apply"),
             ("Λ_R a", "damped_inverse_apply", "damped_inverse_explicit")]
ALGOS = [a for _, *pair in OPERATORS for a in pair]
# Table I's columns: (label, operator index, stages whose times add up; None = the whole function)
COLUMNS = [("Λ⁻¹λ", 0, None), ("Λ_R a", 1, None), ("Λ⁻¹ new vector", 0, ("apply",)),
           ("Λ_R new vector", 1, ("apply",)), ("Λ'_R new damping", 1, ("damping", "apply"))]
MAX_COMPILE = 600_000      # instructions; larger functions are counted but not compiled
LEVELS = ((20_000, "-O2"), (float("inf"), "-Og"))        # replaces build.AUTO_LEVELS here


def calls_for(instructions):
    """Calls per repetition: ~0.1 s per repetition whatever the function's size."""
    return int(min(20_000, max(100, 2e8 / max(instructions, 1))))


def inputs(robot, cs, samples, seed):
    sets = timing.random_samples(robot, cs, samples, seed)
    rng = np.random.default_rng(seed + 7)
    for x in sets:
        x["lam"], x["R"] = rng.normal(size=cs.m), rng.uniform(0.1, 1.0, cs.m)
    return sets


def with_stored(staged, sets):
    """The sets plus what each stage stores for the next (w_factor, w_damping) and the
    staged result."""
    out = []
    for x in sets:
        x = dict(x)
        for f in staged.stages:
            spec = f.manifest["stage"]
            res = staged.run(spec["name"], **{n: x[n] for n in spec["inputs"]})
            x[spec["work_out"] or "staged_result"] = next(iter(res.values()))
        out.append(x)
    return out


def stage_counts(res):
    return ", ".join(f"{k} {v['instructions']:,}" for k, v in res.items() if k != "full")


def measure(name, spec, scenario, args, say):
    """{algorithm: {"full"/stage: {...}}} for one scenario, and its facts."""
    robot = load_robot(spec)
    cs, _ = api.constraint_set(robot, scenario)
    base = explicit_delassus(robot, cs, ca.SX.sym("q", robot.nq), cs.K_body())[0]   # numeric K only
    say(f"{name}: nv = {robot.nv}, m = {cs.m}, explicit Λ⁻¹ by {base}")
    sets = inputs(robot, cs, args.samples, args.seed)
    oracle = {a: ORACLES[a](robot, cs, dict(sets[0], K={})) for a in ALGOS}
    results, harnesses = {}, {}
    for a in ALGOS:
        t0 = time.perf_counter()
        f, _, _ = trace(robot, cs, a)
        full = count_ops(f)["instructions"]
        stages = staging.split(f, staging.algorithm_stages(a, list(f.name_in())))
        results[a] = {"full": {"instructions": full, "sz_w": int(f.sz_w())}}
        for st in stages:
            results[a][st.name] = {"instructions": count_ops(st.function)["instructions"], "sz_w": int(st.function.sz_w()),
                                   "stored": int(st.function.size1_out(0)) if st.work_out else None}
        if full > MAX_COMPILE:
            say(f"  {a}: {full:,} instructions, not compiled (> {MAX_COMPILE:,})")
            continue
        mono = api.generate(robot, scenario, a, out_dir=args.out)
        staged = api.generate(robot, scenario, a, out_dir=args.out, stages=True)
        stored = with_stored(staged, sets)
        results[a]["full"]["error"] = relative_error(mono(**{n: sets[0][n] for n in mono.input_names}), oracle[a])
        results[a]["apply"]["error"] = relative_error(stored[0]["staged_result"], oracle[a])
        for key, g in [("full", mono), *zip(staged.names, staged.stages)]:
            results[a][key]["opt"] = next((f for f in g.manifest["cflags"] if f.startswith("-O")), "")
            harnesses[(a, key)] = timing.CHarness(g, stored if key != "full" else sets, calls=calls_for(
                results[a][key]["instructions"]), seed=args.seed, label=f"{a}/{key}")
        say(f"  {a}: {full:,} instructions ({stage_counts(results[a])}), ready in {time.perf_counter() - t0:.0f} s")
    ns = {k: [] for k in harnesses}
    try:
        for r in range(args.reps):
            for k, h in harnesses.items():
                ns[k] += h.run(1).ns
            say(f"  repetition {r + 1}/{args.reps}")
    finally:
        for h in harnesses.values():
            h.close()
    for (a, key), v in ns.items():
        results[a][key]["us"] = statistics.median(v) / 1e3
    return {"name": name, "robot": robot, "cs": cs, "base": base, "results": results}


def stage_rows(m):
    rows = []
    for a, res in m["results"].items():
        route = "explicit" if "explicit" in a else "matrix-free"
        for key, r in res.items():
            rows.append([m["name"], m["robot"].nv, m["cs"].m, route, a, key, r["instructions"], r.get("opt", "not compiled"),
                         r.get("us"), r["sz_w"], r["sz_w"] * 8, r.get("stored"), r.get("error")])
    return rows


def column(m, op, stages, field):
    """(matrix-free, explicit) value of a Table I column: the whole function or a sum of stages."""
    out = []
    for a in OPERATORS[op][1:]:
        res = m["results"][a]
        vals = [res[s].get(field) for s in (stages or ("full",))]
        out.append(None if any(v is None for v in vals) else sum(vals))
    return out


def summary_rows(measured, field, digits):
    rows = []
    for m in measured:
        row = [m["name"], m["robot"].nv, m["cs"].m, m["base"]]
        for _, op, stages in COLUMNS:
            mf, ex = column(m, op, stages, field)
            row += [None if mf is None else round(mf, digits), None if ex is None else round(ex, digits),
                    None if mf is None or ex is None or ex == 0 else round(mf / ex, 3)]
        rows.append(row)
    return rows


def plot(measured, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(COLUMNS), figsize=(4 * len(COLUMNS), 4.2), sharey=True)
    x = np.arange(len(measured))
    for ax, (label, op, stages) in zip(axes, COLUMNS):
        vals = np.array([[np.nan if v is None else v for v in column(m, op, stages, "us")] for m in measured])
        ax.bar(x - 0.2, vals[:, 0], 0.4, label="matrix-free", color="tab:blue")
        ax.bar(x + 0.2, vals[:, 1], 0.4, label="explicit", color="tab:gray")
        ax.set_title(label)
        ax.set_yscale("log")
        ax.set_xticks(x, [m["name"] for m in measured], rotation=60, ha="right", fontsize=8)
    axes[0].set_ylabel("µs per call (median)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Matrix-free vs explicit Delassus operators, whole and re-evaluated (cf. matrix-free paper Table I)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", metavar="ROBOT/SCENARIO",
                    help="only these (repeatable), e.g. go2/4F3, swimmer:n=10/default")
    ap.add_argument("--reps", type=int, default=5, help="repetitions, the median is reported (default 5)")
    ap.add_argument("--samples", type=int, default=32, help="random inputs cycled over (default 32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(api.DEFAULT_OUT / "_table1"), help="generated code (cached)")
    args = ap.parse_args(argv)
    build.AUTO_LEVELS = LEVELS
    t_start = time.perf_counter()

    def say(msg):
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    todo = [s for s in SCENARIOS if not args.scenario or f"{s[1]}/{s[2]}" in args.scenario]
    todo += [(item, *item.rsplit("/", 1)) for item in args.scenario or []
             if item not in {f"{s[1]}/{s[2]}" for s in SCENARIOS}]
    measured = []
    for name, spec, scenario in todo:
        try:
            measured.append(measure(name, spec, scenario, args, say))
        except DelassusError as exc:
            print(f"{name} ({spec}/{scenario}) skipped: {exc}")
    if not measured:
        return
    heads = ["scenario", "nv", "m", "explicit Λ⁻¹ by"]
    for label, _, _ in COLUMNS:
        heads += [f"{label} MF", f"{label} EX", f"{label} MF/EX"]
    write("table1", summary_rows(measured, "us", 3), heads,
          f"Matrix-free (MF) vs explicit (EX): µs per call, median of {args.reps} interleaved repetitions "
          f"({timing.machine()})")
    write("table1_ops", summary_rows(measured, "instructions", 0), heads,
          "Matrix-free (MF) vs explicit (EX): instructions (cse)")
    write("table1_stages", [r for m in measured for r in stage_rows(m)],
          ["scenario", "nv", "m", "route", "algorithm", "stage", "instructions", "gcc", "µs", "sz_w", "sz_w bytes",
           "stored doubles", "rel. error vs NumPy (sample 0)"],
          "Every function and stage: instructions, µs, CasADi work array, values stored for the next stage")
    print(f"-> {plot(measured, RESULTS / 'table1.png')}")
    say("done")


if __name__ == "__main__":
    main()
