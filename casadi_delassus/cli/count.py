"""``count``: operation counts of each algorithm, traced and not compiled."""
from __future__ import annotations

import click

from .. import report
from ..codegen.derivatives import trace_derivative
from ..codegen.trace import choose_cheapest, trace
from ..names import printable
from ..opcount import count_ops
from ..registry import AUTO
from .main import cli
from .options import (ROBOT_HELP, algorithm_names, derivative_names, derivative_opts, mimic_opt, resolve, trace_opts,
                      with_options)


@cli.command(epilog=ROBOT_HELP)
@with_options(trace_opts)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@with_options(derivative_opts)
@mimic_opt
def count(robot, fixed_base, scenario, specs, algorithms, cse, fmt, derivatives, wrt, method, mimic):
    """Count the operations of each algorithm (traced, not compiled); with --derivative, of its
    derivatives too (and how many times the value's count they are)."""
    derivatives = derivative_names(derivatives, wrt)
    t = resolve(robot, scenario, specs, fixed_base, say_base=fmt == "table", mimic=mimic)
    robot, cs = t.robot, t.cs
    counts = {}
    for a in algorithm_names(algorithms):
        if a == AUTO:
            a, _, reason = choose_cheapest(robot, cs, cse=cse)
            click.echo(f"auto -> {a}: {reason}", err=True)
        f, _, _ = trace(robot, cs, a, cse=cse)
        g, _, _ = trace(robot, cs, a, cse=cse, osim=True)
        counts[a] = dict(count_ops(f), cse=cse, with_osim=count_ops(g))
        for d in derivatives:
            h, _, _, record = trace_derivative(robot, cs, a, d, wrt, cse=cse, method=method)
            c = count_ops(h)
            counts[a].setdefault("derivatives", {})[d] = dict(
                c, wrt=record["wrt"], method=record["method"], times_value=round(c["instructions"] / counts[a]["instructions"], 2))
    if fmt == "json":
        click.echo(report.dumps(report.count_record(robot, cs, counts)))
        return
    if derivatives:
        headers = ["algorithm", "derivative", "wrt", "method", "instructions", "× value", "flops"]
        rows = [[a, d, ",".join(x["wrt"]), ",".join(sorted(set(x["method"].values()))), x["instructions"],
                 x["times_value"], x["flops"]] for a, c in counts.items() for d, x in c["derivatives"].items()]
    else:
        headers = ["algorithm", "instructions", "with Λ (LDLᵀ)", "flops", "add", "mul", "div", "sqrt", "neg"]
        rows = [[a, c["instructions"], c["with_osim"]["instructions"], c["flops"],
                 *(c["ops"][k] for k in ("add", "mul", "div", "sqrt", "neg"))]
                for a, c in counts.items()]
    if fmt == "csv":
        click.echo(report.to_csv(rows, headers))
    else:
        click.echo(printable(f"{robot.name}: nv = {robot.nv}, m = {cs.m} ({', '.join(cs.specs)}), cse = {cse}"))
        click.echo(report.table(rows, headers))
