"""Frictional contact step (issues 25 and 33) on its four problems (go1_stand, go1_slide, talos_stand, a1_stand):
casadi_delassus/timing/contact_bench.py (ours against each anchor's fastest documented route: Pinocchio's PGS and
its ADMM with every ρ update rule and Anderson acceleration, the whole step with v_next, from C++; MuJoCo's
mj_forward in C with each solver and cone, on a model with our physics only), plus the batched step's throughput
on go1 over one and two cores, and the share of the machine's scalar peak (bench/results/peak.json from
bench/peak.py, else timing/peak.py in this run) that ours' step without iterations reaches.
``casadi-delassus bench ROBOT --contact`` runs the same for one robot's problems.

    taskset -c 0,1 .venv/bin/python bench/contact.py [--reps 11] [--calls 2000] [--anderson 0,5]

(the run of docs/results.md: ``--reps 5 --calls 1000 --anderson 0,3,5,10``).  Writes bench/results/contact.md."""
from __future__ import annotations

import argparse
import os

import common
from casadi_delassus.codegen.contact_step import step_parts
from casadi_delassus.timing import contact_bench as cb
from casadi_delassus.timing.phases import instructions


def step_instructions(problems, out):
    """{(problem, solver): SX instructions of ours' step without iterations (prep + post)}."""
    counts = {}
    for p in problems:
        for solver in ("admm", "pgs"):
            s = cb.contact_step(p.robot, p.specs, solver=solver, mu=p.mu, out_dir=out, cflags=cb.CFLAGS)
            m = s.manifest
            prep, post = step_parts(s.robot, s.contacts, m["function"], m["delassus"], m["linear_solve"])[:2]
            counts[p.name, solver] = instructions(prep) + instructions(post)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--anderson", default="0,5", help="Anderson capacities of Pinocchio's ADMM routes")
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    anderson = tuple(int(a) for a in args.anderson.split(","))
    problems = cb.all_problems()
    times, notes = cb.measure(problems, args.reps, args.calls, args.out, common.say, anderson)
    peak, source = common.scalar_peak(cpus[0])
    command = (f"taskset -c {','.join(map(str, cpus))} .venv/bin/python bench/contact.py --reps {args.reps} "
               f"--calls {args.calls} --anderson {args.anderson}")
    text = cb.markdown(problems, times, notes, command, args.reps, cb.batch_rows(problems[0], args.out, args.reps),
                       peak, step_instructions(problems, args.out))
    common.publish("contact.md", text, f"Scalar add+mul peak of this machine ({source}): {peak:.2f} ops/ns.\n\n")


if __name__ == "__main__":
    main()
