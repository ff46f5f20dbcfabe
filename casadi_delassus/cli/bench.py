"""``bench``: time the generated C against Pinocchio, or a batch, the contact step or the CUDA kernels."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from .. import api, report
from ..errors import InputError
from ..registry import AUTO
from .main import cli
from .options import algorithm_names, cflag_tuple, gen_opts, resolve, target_opts, with_options


@cli.command()
@with_options(target_opts)
@click.option("-a", "--algorithm", "algorithms", multiple=True, metavar="ALGO",
              help="algorithm(s) to time, 'auto', 'all' (every Delassus algorithm, the default) or "
                   "'dynamics' (every constrained-dynamics solver)")
@click.option("--reps", default=5, show_default=True, help="repetitions (the median is reported)")
@click.option("--calls", default=10_000, show_default=True, help="calls per repetition, cycling over the inputs")
@click.option("--samples", default=64, show_default=True, help="random configurations cycled over")
@click.option("--pinocchio", "pin_method", type=click.Choice(["auto", "cpp", "python", "none"]), default="auto",
              show_default=True, help="Pinocchio timing: C++ against the pin wheel, Python, or auto (C++ if it builds)")
@click.option("--results", "results_dir", default=None, metavar="DIR", help="also write DIR/runtime.md, .csv and a PNG")
@click.option("--batch", "batch_n", type=click.IntRange(min=1), default=None, metavar="N",
              help="instead: configurations per µs of the single call, the batch of N on one and on all cores "
                   "(C and Python), Pinocchio and MuJoCo, against the measured peaks (DIR/batch.md with --results)")
@click.option("--contact", is_flag=True,
              help="instead: issue 25's frictional contact step on ROBOT's problems (go1: go1_stand, go1_slide; talos: "
                   "talos_stand) against Pinocchio's ADMM and PGS routes and MuJoCo (DIR/contact.md with --results)")
@click.option("--gpu", is_flag=True,
              help="instead: the CUDA kernels (FP64/FP32, both layouts) on this machine's GPU, configurations/µs at "
                   "N = 65,536 and 1,048,576 (bench/gpu.py's measurement); exit 2 without CuPy, a CUDA device or nvcc")
@with_options(gen_opts)
def bench(robot, fixed_base, scenario, specs, algorithms, reps, calls, samples, pin_method, results_dir, batch_n, contact,
          gpu, out_dir, cflags, cc, force, name):
    """Time the generated C (a C harness calling the compiled .so) against Pinocchio's
    computeDelassusMatrix (constraintDynamics for the constrained-dynamics solvers, aba for
    aba) on the same inputs; with --batch N the batched evaluation (casadi_delassus/timing/batch_bench.py);
    with --contact the contact step (casadi_delassus/timing/contact_bench.py); with --gpu the CUDA
    kernels on the GPU (casadi_delassus/timing/gpu_bench.py)."""
    from .. import timing
    from ..registry import delassus_algorithms, dynamics_algorithms
    if contact:
        if specs or scenario or batch_n or algorithms or gpu:
            raise click.UsageError("--contact times issue 25's contact problems: not with -c, --scenario, --batch, --gpu or -a")
        return _bench_contact(robot, reps, calls, results_dir, out_dir)
    t = resolve(robot, scenario, specs, fixed_base)
    robot, constraints = t.robot, t.constraints
    gen = dict(out_dir=out_dir, cflags=cflag_tuple(cflags), cc=cc, force=force, name=name)
    if gpu:
        if batch_n or len(algorithms) > 1:
            raise click.UsageError("--gpu times one algorithm (-a ALGO, default auto): not with --batch")
        from ..timing import gpu_bench
        gpu_bench.bench_on_gpu("case", robot, constraints, (algorithms or [AUTO])[0], functools.partial(api.generate, **gen),
                               reps=reps)
        return
    if batch_n:
        return _bench_batch(robot, constraints, algorithms, reps, batch_n, results_dir, gen)
    names = list(algorithms) or ["all"]
    names = [n for x in names for n in (delassus_algorithms() if x == "all" else
                                         dynamics_algorithms() if x == "dynamics" else [x])]
    names = algorithm_names(names)
    res = timing.benchmark(robot, constraints, names, calls=calls, reps=reps, samples=samples, cc=cc, out_dir=out_dir,
                           cflags=gen["cflags"], force=force, pinocchio=pin_method,
                           progress=lambda s: click.echo(s, err=True), name=name)
    click.echo(timing.describe(res))
    click.echo(report.table(timing.result_rows(res), timing.HEADERS))
    for note in res["notes"]:
        click.echo(f"note: {note}")
    if results_dir:
        for p in timing.write_results([res], results_dir):
            click.echo(f"-> {p}")


def _bench_batch(robot, constraints, algorithms, reps, n, results_dir, generate):
    import json
    import os
    import shlex
    from ..timing import batch_bench
    if len(algorithms) > 1:
        raise click.UsageError("--batch times one algorithm (-a ALGO, default auto)")
    say = lambda s: click.echo(s, err=True)     # noqa: E731
    cpus = os.sched_getaffinity(0)
    peaks = batch_bench.measure_peaks(max(cpus), say)
    res = batch_bench.run(robot, constraints, (algorithms or [AUTO])[0], reps=reps, n_c=n, n_py=n, all_cpus=cpus,
                          progress=say, generate=generate)
    command = shlex.join(["casadi-delassus", *sys.argv[1:]])
    text = batch_bench.markdown([res], peaks, command, reps)
    click.echo(text)
    if results_dir:
        out = Path(results_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "batch.md").write_text(text)
        (out / "batch.json").write_text(json.dumps(batch_bench.as_json([res], peaks), indent=1))
        click.echo(f"-> {out / 'batch.md'}, batch.json")


def _bench_contact(robot, reps, calls, results_dir, out_dir):
    import os
    import shlex
    from ..timing import contact_bench
    problems = contact_bench.problems_of(robot)
    if not problems:
        raise InputError(f"bench --contact: issue 25's contact problems are on go1 and talos, not {robot!r}")
    say = lambda s: click.echo(s, err=True)     # noqa: E731
    times, notes = contact_bench.measure(problems, reps, calls, out_dir, say)
    say("batched throughput")
    rows = contact_bench.batch_rows(problems[0], out_dir, reps, threads=(1, len(os.sched_getaffinity(0))))
    text = contact_bench.markdown(problems, times, notes, shlex.join(["casadi-delassus", *sys.argv[1:]]), reps, rows)
    click.echo(text)
    if results_dir:
        out = Path(results_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "contact.md").write_text(text)
        click.echo(f"-> {out / 'contact.md'}")

