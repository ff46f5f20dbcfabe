"""Our compiled Jacobians of the dynamics against Pinocchio's analytical derivatives in C++, timed
side by side in one run (issue 14, done-when 3), with their cost against the value and AD.

    taskset -c 1 .venv/bin/python bench/derivatives.py                 # go1 4F3, talos 2F, g1 2F
    taskset -c 1 .venv/bin/python bench/derivatives.py -s go1/4F3 -a aba --reps 7
    .venv/bin/python bench/derivatives.py --counts-only                 # instructions, no compiling
    nice .venv/bin/python bench/derivatives.py --compile-times [-s talos/2F] [-a pv ...] [-d jvp ...]

Per scenario and algorithm (rnea: ∂τ/∂(q, v, a); aba: ∂v̇/∂(q, v, τ); pv, ltl: ∂(v̇, λ)/∂(q, v, τ)):
- instructions of the traced value function, of our Jacobian (codegen/derivatives.py, the
  algorithm's analytical blocks), of the forward-mode AD Jacobian (method "ad") and of a VJP
  (one reverse sweep), all with q in the tangent space;
- generation and gcc time of the Jacobian (``auto`` flags: the level drops with size,
  codegen/build.py): ``cd.generate(..., derivative="jacobian")``, or, above --split-above
  instructions, the same function split into a shared stage and one per input
  (codegen/staging.split_outputs), each compiled on its own and timed as a chain;
- its runtime from the C harness (dlopen) against ``pinocchio::computeRNEADerivatives`` (rnea),
  ``computeABADerivatives`` (aba) and ``constraintDynamics`` + ``computeConstraintDynamicsDerivatives``
  (pv, ltl) in C++, on the same random (q, v, τ), repetitions interleaved; median, min/max,
  Pinocchio / ours and instructions per ns.

``--compile-times`` (done-when 4: ≤ 60 s each on talos 2F) generates every derivative (jvp,
vjp, jacobian with respect to all inputs) of each algorithm (default pv, pv_early, aba, ltl, pv_soft,
ltl_soft, rnea) from scratch into a temporary folder through ``cd.generate`` (trace, cse,
count, C, gcc with cflags auto, manifest) and reports its instructions against the value's,
the optimisation level and the CPU times (this process's for tracing and C, gcc's own from
getrusage of the children: what a quiet machine would take) beside the wall time; writes
bench/results/derivative_times_<robot>_<scenario>.md.

Accuracy (against finite differences and against Pinocchio) is bench/derivative_accuracy.py's.
Writes bench/results/derivatives.md and .csv (derivative_counts with --counts-only).
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time

from common import write  # noqa: F401  (puts the repository on sys.path)

import casadi as ca  # noqa: E402

from casadi_delassus import api, timing  # noqa: E402
from casadi_delassus.codegen import build, staging  # noqa: E402
from casadi_delassus.runtime import artifact  # noqa: E402
from casadi_delassus.codegen.derivatives import trace_derivative  # noqa: E402
from casadi_delassus.codegen.trace import trace  # noqa: E402
from casadi_delassus.model import load_robot  # noqa: E402
from casadi_delassus.opcount import count_ops  # noqa: E402
from casadi_delassus.verify.derivative_oracle import ORACLE_WRT  # noqa: E402

DEFAULT_SCENARIOS = ["go1/4F3", "talos/2F", "g1/2F"]
DEFAULT_ALGORITHMS = ["aba", "pv", "ltl"]
# what Pinocchio's derivatives differentiate by (k is Pinocchio's own reference, not an input)
WRT = {a: tuple(w for w in wrt if w != "k") for a, wrt in ORACLE_WRT.items()}
SPLIT_ABOVE = 150_000    # instructions: above, gcc's auto level would drop to -O0 (codegen/build.AUTO_LEVELS)


def counts(robot, cs, algorithm):
    """Instructions of the value, our Jacobian, forward-mode AD's Jacobian and a VJP."""
    def n(mode, method="auto"):
        return count_ops(trace_derivative(robot, cs, algorithm, mode, WRT[algorithm], method=method)[0])["instructions"]
    t0 = time.perf_counter()
    ours = n("jacobian")
    return {"value": count_ops(trace(robot, cs, algorithm)[0])["instructions"], "ours": ours,
            "trace_s": time.perf_counter() - t0, "ad": n("jacobian", "ad"), "reverse": n("vjp")}


def compile_jacobian(robot, cs, scenario, algorithm, wrt, out_dir=api.DEFAULT_OUT, cflags=build.DEFAULT_CFLAGS,
                     force=False, progress=None, split_above=SPLIT_ABOVE):
    """[(stage, CompiledFunction)]: ``cd.generate``'s Jacobian of ``algorithm`` with respect to
    ``wrt`` (one function, stage None), or, above ``split_above`` instructions, that function
    split into ``_shared`` and one stage per input of ``wrt`` (codegen/staging.split_outputs),
    each compiled, cached and loaded through codegen/build.py's pieces."""
    say = progress or (lambda s: None)
    t0 = time.perf_counter()
    f, inputs, outputs, _ = trace_derivative(robot, cs, algorithm, "jacobian", wrt)
    t_trace = time.perf_counter() - t0
    n = count_ops(f)["instructions"]
    say(f"{robot.name} {scenario} {algorithm} jacobian: {n:,} instructions, traced in {t_trace:.1f} s")
    if n <= split_above:
        g = api.generate(robot, cs, algorithm, out_dir=out_dir, cflags=cflags, force=force, derivative="jacobian",
                         wrt=wrt)
        return [(None, g)]
    model = artifact.model_name(robot)
    folder = artifact.folder(out_dir, model, scenario)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{algorithm}_jacobian"        # the stages' names: <stem>_<stage> (codegen/artifact.py)
    fname = artifact.function_name(model, scenario, stem)
    cc = build.find_compiler()
    key = build.content_hash(robot, cs, stem, cflags, True, cc, False, f"{fname} wrt {','.join(wrt)} split {split_above}")
    index = folder / f"{stem}.stages.json"
    if not force and index.is_file():
        paths = [folder / p for p in json.loads(index.read_text())]
        if all(artifact.cached(p, key) for p in paths):
            return _load(paths)
    f = ca.Function(fname, f.sx_in(), f.call(f.sx_in()), f.name_in(), f.name_out())
    stages = staging.split_outputs(f, [(x, [o for o in f.name_out() if o.endswith(f"_d{x}")]) for x in wrt])
    sizes = {staging.work_name(staging.SHARED): int(stages[0].function.size1_out(0))}
    described = {o["name"]: o for o in outputs}
    paths = []
    for k, st in enumerate(stages):
        ins = inputs + ([{"name": st.work_in, "shape": [sizes[st.work_in]], "meaning": "the shared stage's output"}]
                        if st.work_in else [])
        outs = ([{"name": st.work_out, "shape": [sizes[st.work_out]], "meaning": "intermediates the other stages read"}]
                if st.work_out else [described[o] for o in st.function.name_out()])
        manifest = build.make_manifest(st.function, robot, cs, scenario, ins, outs, cflags, cc, True, key,
                                       function=st.function.name(), model_name=model, algorithm=stem, osim=False,
                                       stage={"name": st.name, "index": k, "of": [s.name for s in stages],
                                              "inputs": st.inputs, "work_in": st.work_in, "work_out": st.work_out,
                                              "work_sizes": sizes})
        say(f"{robot.name} {scenario} {stem}: stage {st.name}, {manifest['op_count']['instructions']:,} instructions")
        paths.append(build.write_compiled(st.function, manifest, folder, artifact.stem(stem, stage=st.name), t_trace))
    index.write_text(json.dumps([p.name for p in paths]))
    return _load(paths)


def _load(paths):
    return [(f.manifest.get("stage", {}).get("name"), f) for f in map(api.load, paths)]


def stage_sets(stages, sets):
    """The input sets of every stage: the shared stage's output added for the later ones."""
    if len(stages) == 1:
        return [sets]
    shared = stages[0][1]
    work = [shared.outputs(**{k: x[k] for k in shared.input_names})[staging.work_name(staging.SHARED)] for x in sets]
    return [sets] + [[x | {staging.work_name(staging.SHARED): w} for x, w in zip(sets, work)]] * (len(stages) - 1)


def _count_row(robot, scenario, algorithm, c):
    return [robot, scenario, algorithm, c["value"], c["ours"], f"{c['ours'] / c['value']:.1f}", c["ad"],
            f"{c['ad'] / c['value']:.1f}", c["reverse"], f"{c['reverse'] / c['value']:.1f}"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", metavar="ROBOT/SCENARIO")
    ap.add_argument("-a", "--algorithm", action="append", metavar="ALGO")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--counts-only", action="store_true", help="instructions only (no compiling or timing)")
    ap.add_argument("--split-above", type=int, default=SPLIT_ABOVE,
                    help="compile a Jacobian of more instructions as a shared stage and one per input")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--compile-times", action="store_true", help="generation and gcc times of every derivative instead")
    ap.add_argument("-d", "--derivative", action="append", choices=["jvp", "vjp", "jacobian"],
                    help="with --compile-times: these derivatives only")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    if args.compile_times:
        for item in args.scenario or ["talos/2F"]:
            compile_times(*item.split("/"), args.algorithm or COMPILE_ALGORITHMS, args.derivative or ["jvp", "vjp", "jacobian"],
                          progress)
        return
    rows = []
    for item in args.scenario or DEFAULT_SCENARIOS:
        rname, _, scenario = item.partition("/")
        robot = load_robot(rname)
        cs, scenario = api.constraint_set(robot, scenario)
        sets = timing.random_samples(robot, cs, args.samples, 0, dynamics=True)
        harnesses, info = {}, {}
        for a in args.algorithm or DEFAULT_ALGORITHMS:
            c = counts(robot, cs, a)
            progress(f"{rname} {scenario} {a}: {json.dumps(c)}")
            info[a] = c
            if args.counts_only:
                continue
            stages = compile_jacobian(robot, cs, scenario, a, WRT[a], force=args.force, progress=progress,
                                      split_above=args.split_above)
            ms = [f.manifest for _, f in stages]
            c["gcc_s"] = [m["timings_s"]["compile"] for m in ms]
            c["cflags"] = " / ".join(dict.fromkeys(m["cflags"][0] for m in ms))
            c["instructions"] = sum(m["op_count"]["instructions"] for m in ms)
            for (st, f), xs in zip(stages, stage_sets(stages, sets)):
                harnesses[(a, st)] = timing.CHarness(f, xs, calls=args.calls, label=f"{a} {st or ''}".strip())
            mode = timing.pinocchio_mode(ms[-1] | {"outputs": [{"name": n} for m in ms for n in
                                                                (o["name"] for o in m["outputs"])]})
            c["pinocchio"] = label = timing.pinocchio_label(mode)
            if label not in harnesses:
                harnesses[label] = timing.pinocchio_harness(robot, cs, sets, args.calls, "cpp", progress=progress,
                                                            mode=mode)
            c["stages"] = [st for st, _ in stages]
        if args.counts_only:
            for a, c in info.items():
                rows.append(_count_row(rname, scenario, a, c))
            continue
        ts = {k: [] for k in harnesses}
        for r in range(args.reps):
            for k, h in harnesses.items():
                ts[k].append(h.run(1).ns[0])
            progress(f"{rname} {scenario} repetition {r + 1}/{args.reps}: " +
                     ", ".join(f"{k} {t[-1] / 1e3:.1f} µs" for k, t in ts.items()))
        for h in harnesses.values():
            h.close()
        for a, c in info.items():
            ours = [sum(ts[(a, st)][r] for st in c["stages"]) for r in range(args.reps)]   # a staged chain: the sum
            pin = ts[c["pinocchio"]]
            mo, mp = statistics.median(ours), statistics.median(pin)
            rows.append(_count_row(rname, scenario, a, c) + [
                         len(c["stages"]), c["cflags"], f"{c['trace_s']:.1f}", " + ".join(f"{x:.0f}" for x in c["gcc_s"]),
                         f"{mo / 1e3:.1f} ({min(ours) / 1e3:.1f}-{max(ours) / 1e3:.1f})",
                         f"{mp / 1e3:.1f} ({min(pin) / 1e3:.1f}-{max(pin) / 1e3:.1f})",
                         f"{mp / mo:.2f}", f"{c['instructions'] / mo:.2f}"])
    headers = ["robot", "scenario", "algorithm", "value instr.", "Jacobian instr.", "× value", "forward AD instr.",
               "× value", "VJP instr.", "× value"]
    if not args.counts_only:
        headers += ["functions", "gcc level", "trace s", "gcc s", "ours µs (min-max)", "Pinocchio µs (min-max)",
                    "Pinocchio / ours", "instr/ns"]
    write("derivative_counts" if args.counts_only else "derivatives", rows, headers,
          "Jacobians of the dynamics (analytical blocks) against Pinocchio's derivatives" +
          ("" if args.counts_only else f" ({timing.machine()}; provisional: a shared machine)"))


# -- generation and gcc times ----------------------------------------------------------------------------
COMPILE_ALGORITHMS = ["pv", "pv_early", "aba", "ltl", "pv_soft", "ltl_soft", "rnea"]


def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def compile_times(robot_name, scenario, algorithms, derivatives, progress):
    robot = load_robot(robot_name)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for algo in algorithms:
            value = api.generate(robot, scenario, algo, out_dir=d).op_count["instructions"]
            for mode in derivatives:
                (me0, kids0), t0 = cpu(), time.perf_counter()
                f = api.generate(robot, scenario, algo, out_dir=d, derivative=mode, force=True)
                (me1, kids1), wall = cpu(), time.perf_counter() - t0
                m = f.manifest
                n = m["op_count"]["instructions"]
                rows.append([algo, mode, ",".join(sorted(set(m["derivative"]["method"].values()))), n,
                             round(n / value, 2), " ".join(x for x in m["cflags"] if x.startswith(("-O", "-D"))),
                             round(me1 - me0, 1), round(kids1 - kids0, 1), round(me1 - me0 + kids1 - kids0, 1),
                             round(m["timings_s"]["compile"], 1), round(wall, 1)])
                progress(f"{robot_name} {scenario} {rows[-1]}")
    write(f"derivative_times_{robot_name}_{scenario}", rows,
          ["algorithm", "derivative", "method", "instructions", "× value", "level", "trace+C CPU s", "gcc CPU s",
           "total CPU s", "gcc wall s", "total wall s"],
          f"Derivative functions on {robot_name} {scenario}: generation and gcc times (cflags auto)")


if __name__ == "__main__":
    main()
