"""``step``: generate, compile and check the contact step."""
from __future__ import annotations

import sys

import click

from ..codegen.contact_step import LINEAR_SOLVES
from ..model import load_robot
from ..progress import step
from .main import cli
from .options import (ROBOT_HELP, STEP_MAX_SAMPLES, base_opt, contact_candidates, contact_opts, floating, gen_opts, robot_arg,
                      solver_opt, with_options)


@cli.command("step", epilog=ROBOT_HELP)
@robot_arg
@base_opt
@with_options(contact_opts)
@solver_opt("auto: ADMM when a body carries more than two contacts, else PGS (contact/step.py auto_solver)")
@click.option("--relaxed", is_flag=True, help="the convex relaxation (Anitescu) instead of the exact De Saxcé problem")
@click.option("--mu", default=0.8, show_default=True, type=float, help="friction coefficient of every contact")
@click.option("--samples", default=20, show_default=True, type=click.IntRange(1, STEP_MAX_SAMPLES),
              help=f"random states checked against the NumPy reference (1 to {STEP_MAX_SAMPLES:,})")
@click.option("--linear-solve", type=click.Choice(LINEAR_SOLVES), default="auto", show_default=True,
              help="ADMM's (G + rho I)^-1: G's dense LDL^T, the staged matrix-free damped inverse, or the fewer "
                   "instructions (codegen/contact_step.py step_parts)")
@with_options(gen_opts[:3])
def step_command(robot, fixed_base, contacts, scenario, solver, relaxed, mu, samples, linear_solve, out_dir, cflags,
                 cc):  # not `step`: progress.step
    """Generate, compile and check the contact step <name>_step (contact/step.py): v_free, the
    Delassus matrix and a frictional-contact ADMM or PGS solve in one C function; its contacts
    are points (candidates without /r), rows [t1, t2, n] along the world axes."""
    from ..verify.step_check import LAMBDA_TOL, check_step
    from ..codegen.contact_step import DEFAULT_CFLAGS as STEP_CFLAGS
    from ..stepping.contact import contact_step
    robot = load_robot(robot, floating_base=floating(fixed_base))
    s = contact_step(robot, contact_candidates(robot, contacts, scenario), solver=solver, mu=mu,
                     relaxed=relaxed, out_dir=out_dir, cflags=tuple(cflags.split()) if cflags else STEP_CFLAGS, cc=cc,
                     linear_solve=linear_solve)
    m = s.manifest
    click.echo(f"{m['function']}_step: m = {m['m']}, Delassus by {m['delassus']}, linear solve {m['linear_solve']}, {s.solver}"
               f"{' (relaxed)' if relaxed else ''} -> {s.so}")
    with step(f"checking {m['function']}_step against the NumPy reference over {samples} random states"):
        c = check_step(s, samples=samples)
    click.echo(f"check against the NumPy reference, {c.samples} random states: max |Δλ|/max|λ| {c.lam_error:.1e} "
               f"(allowed {LAMBDA_TOL:.0e}), max |Δv_next| {c.velocity_error:.1e} (allowed {c.velocity_tol:.0e}), "
               f"at most {c.iterations} iterations, {c.unconverged} not converged, {c.pressed} pressing a contact: "
               f"{'PASS' if c.passed else 'FAIL'}")
    if not c.pressed:
        click.echo("no random state pressed a contact, so the solve was never compared: raise --samples", err=True)
    if not c.passed:
        sys.exit(1)


