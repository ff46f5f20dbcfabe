"""``check``: compile and compare with the oracles; the rows are verify/workflow.py's."""
from __future__ import annotations

import functools
import sys

import click

from .. import api, report
from ..errors import DelassusError
from ..executor import Job, in_order, run
from ..model import load_robot, registry
from ..names import printable
from ..verify import oracles, workflow
from ..verify.check import DEFAULT_TOL, KAPPA_FREE, TOLERANCE_RULE
from ..verify.derivative_oracle import PIN_RULE
from ..verify.derivatives import DOT_TOL, FD_RULE, FD_TOL
from .main import cli
from .options import (CHECK_MAX_SAMPLES, ROBOT_HELP, algorithm_names, cflag_tuple, compile_target, compile_target_opts,
                      derivative_names, derivative_opts, floating, gen_opts, jobs_opt, osim_opt, finite_positive,
                      resolve, trace_opts, with_options)

HELP = f"""Compile and compare with the oracles on random configurations.

    ROBOT 'registry' checks every scenario of every available registry robot.

    Oracles (--oracle, repeatable or a comma list): numpy (the NumPy reference, our own parse of
    the model), pinocchio (Pinocchio's own parse of a URDF file or text; for SDF, spatial_v2 and
    synthetic models a Pinocchio model built from our parse, which checks the algorithms but not
    the parse: the output says so), mujoco (MuJoCo's own compile of an MJCF file or text).
    Default: numpy, plus pinocchio for URDF, SDF and spatial_v2 models when the pin package is
    installed, plus mujoco for MJCF models when the mujoco package is.  An output an oracle cannot compare is reported
    n/a with the reason, never as passed.

    Tolerance: {TOLERANCE_RULE}.  The row shows the output closest to failing (the failing one
    if any): its largest relative error, and its largest ratio of error to allowed error
    (above 1 fails) with κ at that sample.

    With --derivative: {FD_RULE}; a VJP checked after a JVP with respect to the same inputs
    also passes the dot-product test ⟨ẏ, ȳ⟩ = ⟨ẋ, x̄⟩ to {DOT_TOL:g} relative (|a − b| / max(|a|, |b|); in
    brackets |a − b| / (‖ẏ‖ ‖ȳ‖), the scale of the products' rounding, large where the test's
    own inner product cancels); a Jacobian of {PIN_RULE}."""


@cli.command(epilog=ROBOT_HELP, help=HELP)
@with_options(trace_opts)
@osim_opt
@click.option("--oracle", "oracle_opts", multiple=True, metavar="NAME",
              help=f"{', '.join(oracles.ORACLES)} (repeatable or comma-separated; default: see above)")
@click.option("--samples", default=100, show_default=True, type=click.IntRange(1, CHECK_MAX_SAMPLES),
              help=f"random configurations (1 to {CHECK_MAX_SAMPLES:,})")
@click.option("--tol", default=None, type=float, callback=finite_positive,
              help=f"relative error allowed where κ <= {KAPPA_FREE:g}, scaled by κ/{KAPPA_FREE:g} above (see above; "
                   f"default {DEFAULT_TOL:g}); with --derivative, against finite differences (default {FD_TOL:g})")
@click.option("--all-scenarios", is_flag=True, help="every scenario of the robot")
@with_options(gen_opts)
@jobs_opt
@with_options(derivative_opts)
@with_options(compile_target_opts(
    "cuda: check the CUDA form's host build (C++ through the shim, no GPU needed) against the C target's function "
    "(row 'C target') and the oracles (docs/gpu.md)",
    "single: check the float build, against its double build within its stored error bound and against the oracles "
    "with at least that tolerance",
    "with --target cuda: the kernel's internal layout"))
def check(robot, fixed_base, scenario, specs, algorithms, cse, osim, oracle_opts, samples, tol, all_scenarios, out_dir,
          cflags, cc, force, name, jobs, derivatives, wrt, method, target, precision, layout):
    algos, derivatives = algorithm_names(algorithms), derivative_names(derivatives, wrt)
    for o in (n.strip() for g in oracle_opts for n in g.split(",") if n.strip()):
        oracles.get_oracle(o)               # an unknown name fails before anything is built
    if name and robot == "registry":
        raise click.UsageError("--name names one model: not with 'check registry'")
    if fixed_base is not None and robot == "registry":
        raise DelassusError("--fixed-base/--floating-base pick one model's base: not with 'check registry'")
    if derivatives and osim:
        raise click.UsageError("--derivative checks derivatives of the algorithms' own outputs: not with --osim")
    compiled_for = compile_target(target, precision, layout, derivatives=bool(derivatives))
    targets = _targets(robot, fixed_base, scenario, specs, all_scenarios)
    gen = dict(out_dir=out_dir, cflags=cflag_tuple(cflags), cc=cc, cse=cse, force=force, name=name)
    if derivatives:
        rows = []
        for r, constraints in targets:
            cs, scenario_name = api.constraint_set(r, constraints)
            rows += workflow.check_derivatives(r, cs, scenario_name, constraints, algos, derivatives, wrt, method, samples,
                                               FD_TOL if tol is None else tol, _generate(gen))
        click.echo(report.table([row.cells() for row in rows], workflow.derivative_headers(samples)))
        if not all(row.passed for row in rows):
            sys.exit(1)
        return
    rows = []
    run([Job(f"{r.name}/{c if isinstance(c, str) else 'custom constraints'}", _check_job,
             (r, c, algos, oracles.oracle_names(oracle_opts, r), samples, DEFAULT_TOL if tol is None else tol, gen,
              compiled_for, osim)) for r, c in targets],
        workers=jobs, on_done=in_order(_reporter(iter(r for r, _ in targets), rows)))
    click.echo(report.table([row.cells() for row in rows], [h if h != "max rel. error" else
                                                            f"max rel. error ({samples} samples)" for h in workflow.HEADERS]))
    if not all(row.passed for row in rows):
        sys.exit(1)


def _targets(robot, fixed_base, scenario, specs, all_scenarios):
    """[(Robot, constraints as api.generate takes them)] of the command line."""
    if robot == "registry" or all_scenarios:
        robots = [load_robot(n, floating_base=floating(fixed_base)) for n in (registry.names() if robot == "registry"
                                                                              else [robot])
                  if robot != "registry" or registry.is_available(n)]
        return [(r, s) for r in robots for s in r.scenarios]
    t = resolve(robot, scenario, specs, fixed_base)
    return [(t.robot, t.constraints)]


def _generate(gen):
    """api.generate with the command's output folder and flags (looked up now: tests patch api)."""
    return functools.partial(api.generate, **gen)


def _check_job(robot, constraints, algorithms, oracle_names, samples, tol, gen, compiled_for, osim):
    """One scenario's (CheckRows, notes): a job of its own, so scenarios run on several processes."""
    cs, scenario = api.constraint_set(robot, constraints)
    sessions = {}
    for o in oracle_names:
        try:
            sessions[o] = oracles.get_oracle(o).session(robot, cs)
        except DelassusError as exc:         # the oracle's model contradicts ours: every row fails
            sessions[o] = exc
    return workflow.check_scenario(robot, cs, scenario, constraints, algorithms, sessions, samples, tol,
                                   _generate(dict(gen, osim=osim)), compiled_for, osim=osim)


def _reporter(robots, rows):
    """The on_done of each scenario's job: its notes (once each) and one line per row on stderr."""
    said = set()

    def report_target(result):
        new_rows, notes = result
        r = next(robots)
        rows.extend(new_rows)
        for o, lines in notes.items():
            for line in lines:
                if (r.name, o, line) not in said:
                    said.add((r.name, o, line))
                    click.echo(printable(f"  {r.name}: {o}: {line}"), err=True)
        for row in new_rows:
            err = f"{row.others}" if row.error is None else \
                f"{row.output} max rel. error {row.error:.2e}, worst error/allowed {row.ratio}"
            click.echo(printable(f"  {row.robot}/{row.scenario} {row.algorithm} vs {row.oracle}: {err} ({row.result})"),
                       err=True)
    return report_target
