"""Where the time of one contact step and of one rollout step goes (issue 33 point 4): each generated function of the
compiled step and of the compiled rollout timed alone in C (casadi_delassus/timing/phases.py,
templates/phase_timing.c.j2: dlopen, thread CPU time, interleaved), with its SX instructions, instructions per ns
and share of the machine's scalar peak (bench/peak.py's bench/results/peak.json, else measured in the run), its share
of the step; then what the phases recompute of each other (SX instructions apart and fused with cse).

    taskset -c 0 .venv/bin/python bench/phases.py [--reps 7] [--calls 2000] [--solver pgs] [--tol 1e-8]

- contact step: go1_stand (the solver of --solver) and talos_stand (ADMM), at the problem's state;
- rollout step: go1 standing under the joint PD (bench/simulate.py's rollout-speed), 1,000 steps, the whole rollout in
  process CPU time (its C runs on sim.run's worker thread); each generated function at the standing state (all four
  contacts active).

Writes bench/results/phases.md."""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import common
import casadi_delassus as cd
from casadi_delassus.simulation import simulate as sim
from casadi_delassus.contact.rollout import loop_functions
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus import contact_step
from casadi_delassus.codegen.contact_step import step_parts
from casadi_delassus.runtime.contact_step import solver_options
from casadi_delassus.timing import phases as ph
from casadi_delassus.verify import contact_problems as cp
from simulate import DT, GO1_FEET, KD, KP          # bench/simulate.py's go1 scene and PD


def values_at(prep, factor, q, v, tau, dt, lam, eta=1e-8):
    """Every function's inputs by name at (q, v, τ): prep's outputs, λ, ADMM's first damping (√(max·min) of G's
    diagonal + η, codegen/templates/contact_step.c.j2) and the factors it gives."""
    vals = {"q": q, "v": v, "tau": tau, "dt": [dt]}
    vals |= ph.evaluate(prep, vals)
    m = len(lam)
    diag = vals["G"].reshape(m, m, order="F").diagonal()
    d = np.sqrt(diag.max() * diag.min()) + eta
    vals |= {"lam": lam, "b": lam, "d": [d], "R": np.full(m, 1.0 / d), "delta": dt * np.asarray(v) + 1e-3}
    vals |= ph.evaluate(factor, vals)
    return vals


def med(xs):
    return statistics.median(xs)


def row(label, what, ns, count, peak, total):
    """A table row: phase, function, instructions, ns median (min–max), instr/ns, % of peak, share of the step."""
    rate = count / med(ns) if count else None
    return (f"| {label} | {what} | {f'{count:,}' if count else ''} | {med(ns):,.0f} ({min(ns):,.0f}–{max(ns):,.0f}) | "
            f"{f'{rate:.2f}' if rate else ''} | {f'{100 * rate / peak:.0f} %' if rate else ''} | "
            f"{100 * med(ns) / med(total):.0f} % |")


HEAD = ["| phase | generated function | SX instructions | ns per call: median (min–max) | instr/ns | of the scalar peak "
        "| of the step |", "|---|---|---|---|---|---|---|"]


def contact_phases(p, solver, args, peak):
    """Markdown rows of one contact step's phases on problem ``p``."""
    s = contact_step(p.robot, p.specs, solver=solver, mu=p.mu, out_dir=args.out)
    r = s(p.q, p.v, p.tau, dt=p.dt, tol=args.tol, max_iter=10_000)
    m = s.manifest
    prep, post, chosen, op = step_parts(s.robot, s.contacts, m["function"], m["delassus"], m["linear_solve"])
    factor, solve = op.factor, op.solve
    vals = values_at(prep, factor, p.q, p.v, p.tau, p.dt, r.lam)
    fns = [("v_free, G, g, w", prep), ("M⁻¹Jᵀλ", post), ("ADMM's factor (per ρ)", factor),
           ("ADMM's solve (per iteration)", solve)]
    opts = solver_options(args.tol, 10_000, solver, True)
    opts0 = opts.copy()
    opts0[1] = 0
    h = ph.PhaseHarness(s.so, [(f.name().rsplit("_", 1)[1], f, ph.inputs_of(f, vals)) for _, f in fns],
                        dict(symbol=m["function"] + "_step", q=p.q, v=p.v, tau=p.tau, dt=p.dt, mu=p.mu, opts=opts,
                             opts0=opts0, nv=len(p.v), m=len(p.g)), calls=args.calls)
    try:
        ns, first = h.run(args.reps)
    finally:
        h.close()
    for _, f in fns:            # the harness called the functions CasADi evaluates
        ref = ph.evaluate(f, vals)[f.name_out()[0]]
        assert np.allclose(first[f.name().rsplit("_", 1)[1]], ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    total = ns["step"]
    loop = [a - b for a, b in zip(ns["step"], ns["step_0_iterations"])]
    rest = [a - b - c for a, b, c in zip(ns["step_0_iterations"], ns["prep"], ns["post"])]
    lines = [f"### {p.name}, {solver}: {r.iterations} iterations to {args.tol:g} ({m['delassus']}, "
             f"{op.route} linear solve)", "", *HEAD]
    lines.append(row("whole step", "step", total, None, peak, total))
    for (what, f) in fns:
        if solver == "pgs" and "ADMM" in what:
            continue
        lines.append(row(what, f.name().rsplit("_", 1)[1], ns[f.name().rsplit("_", 1)[1]], ph.instructions(f), peak,
                         total))
    lines.append(row(f"the solver's {r.iterations} iterations (step − step without them)", "C loop", loop, None, peak,
                     total))
    lines.append(row("the rest of the step without iterations (residuals, copies)", "C", rest, None, peak, total))
    parts = ph.part_counts(s.robot, s.contacts, chosen)
    lines += ["", f"prep ({ph.instructions(prep):,} SX instructions) against its parts traced alone: "
              + "; ".join(f"{k} {v:,}" for k, v in parts.items())
              + f" (ABA + G + g alone: {sum(v for k, v in parts.items() if 'local' not in k):,}: cse shares the "
              "kinematics and the joint-space sweeps between them inside prep)", ""]
    return lines


def rollout_phases(args, peak):
    """Markdown rows of one rollout step's phases: go1 standing under PD."""
    p = cp.build("go1_stand")
    robot = cd.load_robot("go1")
    scene = sim.Scene(robot, GO1_FEET)
    pd, v0 = cd.pd_controller(robot, p.q, KP, KD), np.zeros(robot.nv)
    factory = sim.factory("compiled", args.solver, args.tol, 1000)
    first = sim.run(scene, p.q, v0, 1.0, DT, pd, factory)
    compiled = factory.rollout(scene, p.q)
    m = compiled.manifest
    prep, post, chosen, op = step_parts(robot, compiled.contacts, m["function"], m["delassus"], "dense")
    factor, solve = op.factor, op.solve
    aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]
    integrate, positions, free = loop_functions(robot, scene._positions, m["function"], aba)
    # at the standing state: the PD's torque there (0: q is its reference, v = 0), the rollout's last impulses
    vals = values_at(prep, factor, p.q, v0, np.zeros(robot.nv), DT, first.forces[-1].ravel() * DT)
    fns = [("gaps: candidates' world positions", positions), ("v_free, G, g, w", prep), ("M⁻¹Jᵀλ", post),
           ("q ⊕ dt v", integrate), ("no contact: v + dt ABA", free), ("ADMM's factor (per ρ)", factor),
           ("ADMM's solve (per iteration)", solve)]
    label = lambda f: f.name().rsplit("_", 1)[1]        # noqa: E731
    h = ph.PhaseHarness(compiled.so, [(label(f), f, ph.inputs_of(f, vals)) for _, f in fns], calls=args.calls)
    per_step, ns = [], {}
    try:
        for _ in range(args.reps):             # the whole rollout interleaved with the functions' rounds
            for k, v in h.run(1)[0].items():
                ns.setdefault(k, []).extend(v)
            # process time: the C runs on sim.run's worker thread (runtime/contact_rollout.py interruptible), which
            # this thread's CPU time missed; pinned to one CPU, the process's is the rollout's, its Python included
            t0 = time.process_time()
            sim.run(scene, p.q, v0, 1.0, DT, pd, factory)
            per_step.append((time.process_time() - t0) / len(first.statuses) * 1e9)
    finally:
        h.close()
    used = ["positions", "prep", "post", "integrate"]
    loop = [t - sum(ns[k][i] for k in used) for i, t in enumerate(per_step)]
    lines = [f"### go1 standing under PD, {args.solver} to {args.tol:g}: {len(first.statuses)} steps, "
             f"{first.iterations.mean():.1f} iterations per step on average, {m['delassus']}", "", *HEAD]
    lines.append(row("whole step (sim.run / steps, process CPU time: the C rollout and its Python)", "rollout", per_step,
                     None, peak, per_step))
    for what, f in fns:
        if args.solver == "pgs" and "ADMM" in what:
            continue
        lines.append(row(what + (" (not called: contacts active)" if label(f) == "free" else ""), label(f),
                         ns[label(f)], ph.instructions(f), peak, per_step))
    lines.append(row("the solver's iterations, feedback, checks, bookkeeping, the call's Python (step − the four above)",
                     "C", loop, None, peak, per_step))
    apart, fused, again = ph.recomputed(prep, positions)
    lines += ["", f"Recomputed kinematics: each step computes the candidates' positions at q_(k+1) (gaps) and, the "
              f"next step, prep at the same q: {ph.instructions(ph.with_cse(positions)):,} (positions, with cse; "
              f"{ph.instructions(positions):,} as emitted) + {ph.instructions(prep):,} = "
              f"{apart:,} SX instructions apart, {fused:,} in one function with cse: **{again:,} instructions "
              f"({100 * again / apart:.1f} %) recomputed per step** (the world transforms of the contact links).  "
              "integrate, post and free recompute nothing of prep: post reads prep's stored q stage w, integrate "
              "takes q and v only, free runs instead of prep.", ""]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--solver", choices=["admm", "pgs"], default="pgs")
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    peak, source = common.scalar_peak(cpus[0])
    os.sched_setaffinity(0, {cpus[0]})
    lines = ["# Phase profile of the contact step and of a rollout step (issue 33)", "",
             f"`taskset -c {','.join(map(str, cpus))} .venv/bin/python bench/phases.py --reps {args.reps} --calls "
             f"{args.calls} --solver {args.solver} --tol {args.tol:g}`; thread CPU time, pinned to one CPU, -march=native; "
             f"scalar add+mul peak {peak:.2f} ops/ns ({source}); load average {os.getloadavg()[0]:.1f} on "
             f"{os.cpu_count()} CPUs at the start.", ""]
    lines += contact_phases(cp.build("go1_stand"), args.solver, args, peak)
    lines += contact_phases(cp.build("talos_stand"), "admm", args, peak)
    lines += rollout_phases(args, peak)
    lines.append(f"Load average at the end: {os.getloadavg()[0]:.1f}.")
    common.publish("phases.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
