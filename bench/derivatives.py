"""Analytical Jacobians of the dynamics (registry.Algorithm.derivative) against Pinocchio's
analytical derivatives, and their cost against the value and CasADi's AD.

    taskset -c 1 .venv/bin/python bench/derivatives.py                 # go1 4F3, talos 2F, g1 2F
    taskset -c 1 .venv/bin/python bench/derivatives.py -s go1/4F3 -a aba --reps 7
    .venv/bin/python bench/derivatives.py --counts-only                 # instructions, no compiling

Per scenario and algorithm (aba: ∂v̇/∂(q, v, τ); pv, ltl: ∂(v̇, λ)/∂(q, v, τ)):
- instructions of the traced value function, of our analytical Jacobian, of CasADi's
  ``ca.jacobian`` of the value (with the tangent map of q applied, as the Jacobian's q-columns
  are in the tangent space) and of one reverse sweep (``ca.jtimes(..., True)``, a VJP);
- generation and gcc time of the Jacobian function (``auto`` flags: the level drops with size,
  codegen/build.py), split into stages when one function would exceed --max-instructions;
- its runtime from the C harness (dlopen) against ``pinocchio::computeABADerivatives``
  (aba) and ``constraintDynamics`` + ``computeConstraintDynamicsDerivatives`` (pv, ltl) in C++,
  on the same random (q, v, τ) with k = Pinocchio's zero contact acceleration, repetitions
  interleaved; median, min/max, Pinocchio / ours and instructions per ns.

Until ``cd.generate(..., derivative="jacobian")`` exists, the Jacobian is compiled here through
codegen/build.py's own pieces (``compile_jacobian``: trace, make_manifest, write_compiled, load),
the function named ``<algo>_jacobian`` (``<algo>_jacobian_<stage>`` when staged).  Writes
bench/results/derivatives.md and .csv.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from common import write  # noqa: F401  (puts the repository on sys.path)

import casadi as ca  # noqa: E402

from casadi_delassus import api, timing  # noqa: E402
from casadi_delassus.codegen import artifact, build, staging  # noqa: E402
from casadi_delassus.model import load_robot  # noqa: E402
from casadi_delassus.opcount import count_ops  # noqa: E402
from casadi_delassus.registry import VECTOR_INPUTS, get_algorithm  # noqa: E402

DEFAULT_SCENARIOS = ["go1/4F3", "talos/2F", "g1/2F"]
DEFAULT_ALGORITHMS = ["aba", "pv", "ltl"]
WRT = ("q", "v", "tau")


def symbols(robot, cs, algo):
    """(q, {vector input: SX}, {K input: SX}, K_bodies) as codegen/trace.py makes them."""
    q = ca.SX.sym("q", robot.nq)
    sizes = {"nv": robot.nv, "m": cs.m}
    vectors = {n: ca.SX.sym(n, sizes[VECTOR_INPUTS[n][0]]) for n in algo.inputs}
    K_syms = {c.input_name: ca.SX.sym(c.input_name, c.rows, 6) for c in cs.inputs}
    K_bodies = [c.K_body(K_syms[c.input_name]) if c.is_input else c.K_body() for c in cs.constraints]
    return q, vectors, K_syms, K_bodies


def tangent_map(robot, q):
    """dq/dδ at δ = 0 of q ⊕ δ (Pinocchio's integrate), nq x nv, as SX of the symbol q: identity
    on revolute and prismatic joints, (−sin, cos) on continuous ones, R and ½ quat ⊗ (δω, 0) on
    a free joint."""
    T = ca.SX(robot.nq, robot.nv)
    for b in robot.bodies:
        k, d, kind = b.q_index, b.v_index, b.joint.kind
        if kind == "free":
            x, y, z, w = (q[k + 3 + i] for i in range(4))
            R = ca.vertcat(ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
                           ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
                           ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)))
            T[k:k + 3, d:d + 3] = R
            for c, (ex, ey, ez) in enumerate(np.eye(3) * 0.5):     # quat ⊗ (e/2, 0)
                T[k + 3:k + 7, d + 3 + c] = ca.vertcat(w * ex + y * ez - z * ey, w * ey + z * ex - x * ez,
                                                       w * ez + x * ey - y * ex, -(x * ex + y * ey + z * ez))
        elif kind == "continuous":
            T[k, d], T[k + 1, d] = -q[k + 1], q[k]
        else:
            T[k, d] = 1
    return T


def counts(robot, cs, algorithm, wrt=WRT):
    """Instructions of the value, our Jacobian, ca.jacobian (tangent columns) and one reverse sweep."""
    algo = get_algorithm(algorithm)
    q, vectors, K_syms, K_bodies = symbols(robot, cs, algo)
    ins = [q, *vectors.values(), *K_syms.values()]
    value = algo.fn(robot, cs, q, K_bodies, **vectors)
    y = ca.vertcat(*[ca.vec(value[o]) for o in value if o in ("vdot", "lam")])
    x = {"q": q} | vectors
    t0 = time.perf_counter()
    ours = algo.derivative(robot, cs, q, K_bodies, wrt, **vectors)
    t_ours = time.perf_counter() - t0

    def n(exprs, extra=()):
        return count_ops(ca.Function("f", [*ins, *extra], ca.cse([ca.densify(e) for e in exprs])))["instructions"]
    out = {"value": n([y]), "ours": n(list(ours.values())), "trace_s": t_ours}
    cols = [ca.mtimes(ca.jacobian(y, q), tangent_map(robot, q)) if w == "q" else ca.jacobian(y, x[w]) for w in wrt]
    out["ca.jacobian"] = n(cols)
    ybar = ca.SX.sym("ybar", y.shape[0])
    bars = [ca.jtimes(y, x[w], ybar, True) for w in wrt]
    bars = [ca.mtimes(tangent_map(robot, q).T, b) if w == "q" else b for w, b in zip(wrt, bars)]
    out["reverse"] = n(bars, [ybar])
    return out


# -- against Pinocchio's analytical derivatives -------------------------------------------------------
def zero_acceleration_k(robot, cs, q, v):
    """k₀(q, v) as SX: 0 for a 6D contact, −ω_F × v_p for a 3D point (frame axes), our own
    expression of pinocchio_oracle.zero_acceleration_k (constrained bodies keep their frames)."""
    from casadi_delassus.sweeps.tree import Tree
    vel, _, _ = Tree(robot, cs, q).velocities(v)
    k = []
    for c, K in zip(cs.constraints, cs.K_body()):
        nu = ca.vertcat(*vel[c.body])
        if c.kind == "6d":
            k.append(ca.SX(6, 1))
            continue
        R = robot.frame(c.link).rotation
        k.append(-ca.cross(ca.mtimes(ca.DM(R.T), nu[:3]), ca.mtimes(ca.DM(K), nu)))
    return ca.vertcat(*k)


def pinocchio_errors(robot, cs, algorithm, samples=20, seed=6):
    """({Jacobian: worst relative error}, worst error of k₀) of ``algorithm``'s Jacobians
    against Pinocchio's computeRNEADerivatives (rnea), computeABADerivatives (aba) or, after
    constraintDynamics, computeConstraintDynamicsDerivatives (pv, ltl) on ``samples`` random
    (q, v, τ).  Pinocchio holds the contact acceleration at its reference k₀(q, v) (zero LOCAL
    acceleration: 0 for 6D, −ω × v_p for 3D) while our k is an input, so ours is compared as
    ∂/∂x + ∂/∂k · ∂k₀/∂x, with ∂k₀/∂(q, v) by CasADi's AD of ``zero_acceleration_k`` (checked
    against pinocchio_oracle.zero_acceleration_k at every sample).  Error: max |ours − Pinocchio|
    / max(1, max |Pinocchio|) per Jacobian."""
    import pinocchio as pin
    from casadi_delassus.verify import pinocchio_oracle as oracle
    model = oracle.model_for(robot)
    data = model.createData()
    algo = get_algorithm(algorithm)
    constrained = "k" in algo.inputs
    wrt = ("q", *algo.inputs)
    q, vectors, _, K_bodies = symbols(robot, cs, algo)
    ours = algo.derivative(robot, cs, q, K_bodies, wrt, **vectors)
    f = ca.Function("ours", [q, *vectors.values()], [ca.densify(e) for e in ours.values()], ["q", *vectors], list(ours))
    if constrained:
        cms = oracle.frame_constraint_models(model, cs.specs)
        cds = pin.StdVec_RigidConstraintData()
        for cm in cms:
            cds.append(cm.createData())
        pin.initConstraintDynamics(model, data, cms, cds)
        v = vectors["v"]
        k0 = zero_acceleration_k(robot, cs, q, v)
        fk = ca.Function("k0", [q, v], [k0, ca.mtimes(ca.jacobian(k0, q), tangent_map(robot, q)), ca.jacobian(k0, v)])
    rng = np.random.default_rng(seed)
    worst, k_err = {}, 0.0
    for _ in range(samples):
        x = {"q": robot.random_q(rng), "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
             "a": rng.normal(size=robot.nv)}
        if not constrained:
            J = {n: np.array(e) for n, e in f(**{n: x[n] for n in f.name_in()}).items()}
            pin_fn, names = ((pin.computeRNEADerivatives, ("dtau_dq", "dtau_dv", "dtau_da")) if algorithm == "rnea" else
                             (pin.computeABADerivatives, ("dvdot_dq", "dvdot_dv", "dvdot_dtau")))
            ref = dict(zip(names, (np.array(e) for e in pin_fn(model, data, *(x[n] for n in f.name_in())))))
        else:
            kn, dk_dq, dk_dv = (np.array(e) for e in fk(x["q"], x["v"]))
            k_err = max(k_err, float(np.abs(kn.ravel() - oracle.zero_acceleration_k(model, data, cms, x["q"], x["v"])).max()))
            raw = {n: np.array(e) for n, e in f(q=x["q"], v=x["v"], tau=x["tau"], k=kn).items()}
            J = {n: raw[n] + (raw[n[:-2] + "dk"] @ {"q": dk_dq, "v": dk_dv}[n[-1]] if n[-1] in "qv" else 0.0)
                 for n in raw if not n.endswith("_dk")}
            pin.constraintDynamics(model, data, x["q"], x["v"], x["tau"], cms, cds)
            ref = dict(zip(("dvdot_dq", "dvdot_dv", "dvdot_dtau", "dlam_dq", "dlam_dv", "dlam_dtau"),
                           (np.array(e) for e in pin.computeConstraintDynamicsDerivatives(model, data, cms, cds))))
        for n in J:
            err = float(np.abs(J[n] - ref[n]).max() / max(1.0, np.abs(ref[n]).max()))
            worst[n] = max(worst.get(n, 0.0), err)
    return worst, k_err


SPLIT_ABOVE = 150_000    # instructions: above, gcc's auto level would drop to -O0 (codegen/build.AUTO_LEVELS)


def compile_jacobian(robot, cs, scenario, algorithm, wrt=WRT, out_dir=api.DEFAULT_OUT, cflags=build.DEFAULT_CFLAGS,
                     force=False, progress=None, split_above=SPLIT_ABOVE):
    """Trace ``algorithm``'s analytical Jacobian, emit, compile and load it with codegen/build.py's
    pieces (the manifest, the atomic write, the verified load), cached like ``cd.generate``.
    Returns [(stage, CompiledFunction)]: one function ``<algo>_jacobian``, or, above
    ``split_above`` instructions, ``_shared`` and one stage per input of ``wrt``
    (codegen/staging.split_outputs), each compiled on its own."""
    say = progress or (lambda s: None)
    algo = get_algorithm(algorithm)
    model = artifact.model_name(robot)
    folder = artifact.folder(out_dir, model, scenario)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{algorithm}_jacobian"
    fname = artifact.function_name(model, scenario, stem)
    cc = build.find_compiler()
    key = build.content_hash(robot, cs, stem, cflags, True, cc, False, f"{fname} wrt {','.join(wrt)} split {split_above}")
    index = folder / f"{stem}.stages.json"
    if not force and index.is_file():
        paths = [folder / p for p in json.loads(index.read_text())]
        if all(build.is_cached(p, key) for p in paths):
            return _load(paths)
    t0 = time.perf_counter()
    q, vectors, K_syms, K_bodies = symbols(robot, cs, algo)
    outputs = algo.derivative(robot, cs, q, K_bodies, wrt, **vectors)
    names = list(outputs)
    f = ca.Function(fname, [q, *vectors.values(), *K_syms.values()], ca.cse([ca.densify(outputs[n]) for n in names]),
                    ["q", *vectors, *K_syms], names)
    t_trace = time.perf_counter() - t0
    say(f"{robot.name} {scenario} {stem}: {f.n_instructions():,} instructions, traced in {t_trace:.1f} s")
    inputs = [{"name": "q", "shape": [robot.nq], "meaning": "configuration, Pinocchio layout"}]
    inputs += [{"name": n, "shape": [int(v.shape[0])], "meaning": algo.input_meaning(n)} for n, v in vectors.items()]
    inputs += [{"name": n, "shape": [c.rows, 6], "meaning": f"K of constraint {c.spec}"}
               for n, c in ((c.input_name, c) for c in cs.inputs)]

    def describe(fn):
        return [{"name": n, "shape": list(fn.size_out(k)), "meaning": f"Jacobian {n}, q-columns in the tangent space"}
                for k, n in enumerate(fn.name_out())]
    if count_ops(f)["instructions"] <= split_above:
        manifest = build.make_manifest(f, robot, cs, scenario, inputs, describe(f), cflags, cc, True, key,
                                       function=fname, model_name=model, algorithm=stem, osim=False)
        paths = [build.write_compiled(f, manifest, folder, stem, t_trace)]
    else:
        stages = staging.split_outputs(f, [(x, [n for n in names if n.endswith(f"_d{x}")]) for x in wrt])
        sizes = {staging.work_name(staging.SHARED): int(stages[0].function.size1_out(0))}
        paths = []
        for k, st in enumerate(stages):
            ins = inputs + ([{"name": st.work_in, "shape": [sizes[st.work_in]], "meaning": "the shared stage's output"}]
                            if st.work_in else [])
            outs = ([{"name": st.work_out, "shape": [sizes[st.work_out]], "meaning": "intermediates the other stages read"}]
                    if st.work_out else describe(st.function))
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-s", "--scenario", action="append", metavar="ROBOT/SCENARIO")
    ap.add_argument("-a", "--algorithm", action="append", metavar="ALGO")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--counts-only", action="store_true", help="instructions only (no compiling or timing)")
    ap.add_argument("--accuracy", action="store_true",
                    help="errors against Pinocchio's derivatives instead (rnea, aba, pv, ltl; 20 samples; "
                         "default scenarios go1/4F3 talos/2F panda/EE6)")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    if args.accuracy:
        return accuracy(args.scenario or ["go1/4F3", "talos/2F", "panda/EE6"], args.algorithm or ["rnea", *DEFAULT_ALGORITHMS],
                        progress)
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
            stages = compile_jacobian(robot, cs, scenario, a, force=args.force, progress=progress)
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
                rows.append([rname, scenario, a, c["value"], c["ours"], f"{c['ours'] / c['value']:.1f}",
                             c["ca.jacobian"], f"{c['ca.jacobian'] / c['value']:.1f}", c["reverse"]])
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
            rows.append([rname, scenario, a, c["value"], c["ours"], f"{c['ours'] / c['value']:.1f}", c["ca.jacobian"],
                         f"{c['ca.jacobian'] / c['value']:.1f}", c["reverse"], len(c["stages"]), c["cflags"],
                         " + ".join(f"{x:.0f}" for x in c["gcc_s"]),
                         f"{mo / 1e3:.1f} ({min(ours) / 1e3:.1f}-{max(ours) / 1e3:.1f})",
                         f"{mp / 1e3:.1f} ({min(pin) / 1e3:.1f}-{max(pin) / 1e3:.1f})",
                         f"{mp / mo:.2f}", f"{c['instructions'] / mo:.2f}"])
    headers = ["robot", "scenario", "algorithm", "value instr.", "Jacobian instr.", "× value", "ca.jacobian instr.",
               "× value", "reverse sweep instr."]
    if not args.counts_only:
        headers += ["functions", "gcc level", "gcc s", "ours µs (min-max)", "Pinocchio µs (min-max)",
                    "Pinocchio / ours", "instr/ns"]
    write("derivative_counts" if args.counts_only else "derivatives", rows, headers,
          "Analytical Jacobians of the dynamics against Pinocchio's derivatives" +
          ("" if args.counts_only else f" ({timing.machine()}; provisional: a shared machine)"))


def accuracy(scenarios, algorithms, progress):
    rows = []
    for item in scenarios:
        rname, _, scenario = item.partition("/")
        robot = load_robot(rname)
        cs, scenario = api.constraint_set(robot, scenario)
        for a in algorithms:
            worst, k_err = pinocchio_errors(robot, cs, a)
            progress(f"{rname} {scenario} {a}: {worst}")
            rows.append([rname, scenario, a, f"{max(worst.values()):.1e}",
                         ", ".join(f"{n} {e:.1e}" for n, e in worst.items()), f"{k_err:.1e}" if "k" in get_algorithm(a).inputs else ""])
    write("derivative_accuracy", rows, ["robot", "scenario", "algorithm", "worst", "per Jacobian", "k₀ vs oracle"],
          "Analytical Jacobians against Pinocchio's derivatives (20 random (q, v, τ); relative to max(1, |Pinocchio|))")


if __name__ == "__main__":
    main()
