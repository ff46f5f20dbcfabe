"""The contact step's derivatives (contact/step_derivatives.py, issue 27 point 3) on issue 25's
three problems: accuracy, what the compiled code costs to build, and the calls' times.

- Accuracy: the Jacobian ∂(v_next, λ)/∂(q, v, τ), assembled from the compiled forward mode,
  against central finite differences of the compiled step (each solve to 1e-12, every
  contact's mode checked unchanged within ±h), per block max |ours − FD| / max |FD|, and the
  JVP/VJP dot-product test over five random pairs.  talos's eight sole corners leave λ
  non-unique: v_next's blocks only.
- Build: instructions per compiled function, the C file's size, the flags, and gcc's wall
  time and peak memory compiling it again as the build did (os.wait4's ru_maxrss: the
  compiler driver and cc1).
- Calls: point (the linearisation: parts, modes, SVD), jacobian (3nv forward columns in one
  mapped call), jvp and vjp, repetitions interleaved; median and spread (min–max) in ms.

    taskset -c 0 .venv/bin/python bench/step_derivatives.py [--h 1e-5] [--cflags auto] [--reps 21]
        [--problems go1_stand go1_slide talos_stand]

Writes bench/results/step_derivatives.md."""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
import time

import numpy as np

import common
from casadi_delassus.verify import step_derivative_check as check


def gcc_cost(deriv):
    """(seconds, peak MiB) of compiling the kept C file again with the build's command."""
    m = deriv.manifest
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [*shlex.split(m["cc"]), *m["cflags"], "-fPIC", "-shared", "-o", os.path.join(tmp, "d.so"),
               str(deriv.files.with_suffix(".c")), "-lm"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} exited with {proc.returncode}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def call_times(deriv, p, lam, reps, seed=0):
    """{call: (median, min, max) ms} over ``reps`` interleaved rounds."""
    rng = np.random.default_rng(seed)
    nv = deriv.robot.nv
    point = deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu)
    w, u = np.split(rng.standard_normal(3 * nv), 3), rng.standard_normal(nv)
    calls = {"point": lambda: deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu),
             "jacobian": lambda: deriv.jacobian(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu),
             "jvp": lambda: deriv.jvp(point, *w), "vjp": lambda: deriv.vjp(point, u)}
    times = {k: [] for k in calls}
    for _ in range(reps):
        for k, f in calls.items():
            t0 = time.perf_counter()
            f()
            times[k].append(1e3 * (time.perf_counter() - t0))
    return {k: (np.median(t), min(t), max(t)) for k, t in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h", type=float, default=1e-5)
    ap.add_argument("--cflags", nargs="+", default=["auto"])
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--problems", nargs="+", default=["go1_stand", "go1_slide", "talos_stand"])
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    accuracy = ["| problem | modes | worst block | blocks (output/input: error) | dot test |", "| --- | --- | --- | --- | --- |"]
    build = ["| problem | instructions (parts, fwd, adj) | C bytes | flags | build's gcc s | gcc s again | gcc peak MiB |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    calls = ["| problem | nv × m | point ms | jacobian ms | jvp ms | vjp ms | jacobian / jvp |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name in args.problems:
        t0 = time.perf_counter()
        p, step, deriv = check.build(name, args.out, tuple(args.cflags))
        errors, dot, modes = check.check(p, args.out, args.h, tuple(args.cflags))
        blocks = ", ".join(f"{o}/{g}: {e:.1e}" for (o, g), e in errors.items())
        kinds = ", ".join(f"{modes.count(m)} {m}" for m in sorted(set(modes)))
        accuracy.append(f"| {name} | {kinds} | {max(errors.values()):.1e} | {blocks} | {dot:.1e} |")
        m = deriv.manifest
        seconds, peak = gcc_cost(deriv)
        build.append(f"| {name} | {', '.join(f'{n:,}' for n in m['instructions'].values())} | {m['c_bytes']:,} | "
                     f"{' '.join(m['cflags'])} | {m['compile_s']:.1f} | {seconds:.1f} | {peak:.0f} |")
        lam = step(p.q, p.v, p.tau, dt=p.dt, mu=p.mu, tol=1e-12, max_iter=100_000).lam
        t = call_times(deriv, p, lam, args.reps)
        calls.append(f"| {name} | {deriv.robot.nv} × {len(lam)} | "
                     + " | ".join(f"{t[k][0]:.3f} ({t[k][1]:.3f}–{t[k][2]:.3f})" for k in ("point", "jacobian", "jvp", "vjp"))
                     + f" | {t['jacobian'][0] / t['jvp'][0]:.1f} |")
        print(accuracy[-1], build[-1], calls[-1], f"({time.perf_counter() - t0:.0f} s with the builds)", sep="\n",
              flush=True)
    command = (f"taskset -c {','.join(map(str, sorted(os.sched_getaffinity(0))))} .venv/bin/python "
               f"bench/step_derivatives.py --h {args.h:g} --cflags {' '.join(args.cflags)} --reps {args.reps} "
               f"--problems {' '.join(args.problems)}")
    common.publish("step_derivatives.md",
                   f"# Contact step derivatives\n\n`{command}`\n\n"
                   f"## Against central finite differences (h = {args.h:g}, τ: h/dt)\n\n" + "\n".join(accuracy) + "\n\n"
                   "## Build\n\n" + "\n".join(build) + "\n\n"
                   f"## Calls ({args.reps} interleaved rounds: median (min–max))\n\n" + "\n".join(calls) + "\n")


if __name__ == "__main__":
    main()
