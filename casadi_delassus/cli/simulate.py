"""``simulate``: step a robot through time on the contact step and write its trajectory."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import numpy as np

from .. import api
from ..codegen.contact_step import LINEAR_SOLVES
from ..contact.result import Options
from ..simulation.simulate import BAUMGARTE
from ..errors import InputError, OutputError
from ..model import file_format, load_robot, on_disk
from .main import cli
from .gains import joint_gains
from .options import (ROBOT_HELP, base_opt, contact_candidates, contact_opts, floating, numbers, robot_arg, solver_opt,
                      with_options)


@cli.command(epilog=ROBOT_HELP)
@with_options([robot_arg, base_opt])
@with_options(contact_opts)
@click.option("-T", "--duration", default=1.0, show_default=True, type=float, help="simulated time (s)")
@click.option("--dt", default=1e-3, show_default=True, type=float, help="time step (s)")
@click.option("--q0", default=None, metavar="x,y,…", help="initial configuration (default: the neutral one)")
@click.option("--drop", default=None, type=float, metavar="H",
              help="move the free base along the normal so that the lowest candidate is H above the ground")
@click.option("--kp", multiple=True, metavar="[NAME=]VALUE",
              help="PD stiffness to q0's joint positions: a number for every one-DoF joint, or NAME=VALUE for the "
                   "joints the pattern NAME matches (fnmatch: 'left_wrist_*=20'; repeatable, later ones win; default 0)")
@click.option("--kd", multiple=True, metavar="[NAME=]VALUE", help="PD damping, as --kp (default 0)")
@click.option("--gains", "gains_file", default=None, metavar="FILE.json",
              help='per-joint gains {"kp": number or {"PATTERN": VALUE, ...}, "kd": ...}, applied before --kp/--kd')
@click.option("--mu", default=0.8, show_default=True, type=float, help="friction coefficient")
@click.option("--normal", default="0,0,1", show_default=True, metavar="nx,ny,nz", help="ground normal")
@click.option("--height", default=0.0, show_default=True, type=float, help="ground offset along the normal (m)")
@solver_opt("auto: per active set, ADMM when a body carries more than two contacts, else PGS")
@click.option("--step", "step_kind", type=click.Choice(["compiled", "reference"]), default="compiled", show_default=True,
              help="the compiled contact step, or the NumPy reference step")
@click.option("--baumgarte", default=BAUMGARTE, show_default=True, type=float,
              help="gap stabilisation β in [0, 1]: a penetration closes by β of its depth a step (0: off)")
@click.option("--linear-solve", type=click.Choice(LINEAR_SOLVES), default=None,
              help="ADMM's (G + rho I)^-1 in the compiled step and its C rollout: G's dense LDL^T, the staged "
                   "matrix-free damped inverse, or the fewer instructions (codegen/contact_step.py step_parts; "
                   "default: the C rollout's dense, the per-step step's auto)")
@click.option("--tol", default=Options.tol, show_default=True, type=float, help="solver tolerance (N·s)")
@click.option("--max-iter", default=Options.max_iter, show_default=True, type=click.IntRange(min=1))
@click.option("-o", "--out", "out_dir", default="simulate_out", show_default=True,
              help="folder for rollout.csv and rollout.png")
@click.option("--out-dir", "build_dir", default=str(api.DEFAULT_OUT), show_default=True,
              help="root of the compiled step and rollout (as generate's -o; cached there)")
@click.option("--ctrl", default=None, metavar="u1,u2,…", help="MJCF models: constant actuator controls (default 0)")
@click.option("--keyframe", default=None, metavar="NAME|INDEX", help="MJCF models: start from this keyframe")
def simulate(robot, fixed_base, contacts, scenario, duration, dt, q0, drop, kp, kd, gains_file, mu, normal, height, solver, step_kind,
             baumgarte, linear_solve, tol, max_iter, out_dir, build_dir, ctrl, keyframe):
    """Step ROBOT through time on the contact step (PD control to q0) and write its trajectory
    and contact forces (CSV), then a figure; exits 1 when the rollout stopped early, 130 when Ctrl-C
    stopped it (the files hold what was computed), 2 on bad input (nothing written) or when a file
    cannot be written (the CSV is written first, and atomically).  An MJCF model runs on cd.mujoco_rollout instead
    (docs/mujoco.md) with its own time step, contacts, solver and actuators under --ctrl."""
    from ..simulation import simulate as sim
    from ..simulation.rollout_io import plot, write_csv
    given = _given(click.get_current_context())
    if on_disk(robot) and file_format(Path(robot)) == "mjcf":
        return _simulate_mjcf(robot, given, duration, q0, ctrl, keyframe, out_dir, build_dir)
    robot = load_robot(robot, floating_base=floating(fixed_base))
    if given & MJCF_ONLY:
        raise InputError(f"{', '.join(sorted(given & MJCF_ONLY))}: for MJCF models only ({robot.name} is not one)")
    q = robot.neutral_q() if q0 is None else numbers(q0, "--q0")
    if q.shape != (robot.nq,):
        raise InputError(f"--q0 must have {robot.nq} numbers (nq of {robot.name}), got {q.size}")
    kp, kd = joint_gains(robot, kp, kd, gains_file)
    scene = sim.Scene(robot, contact_candidates(robot, contacts, scenario), numbers(normal, "--normal"), height, mu)
    start = q if drop is None else sim.place(scene, q, drop)
    controller = sim.pd_controller(robot, q, kp, kd) if (kp.any() or kd.any()) else None
    build = {"out_dir": build_dir} if step_kind == "compiled" else {}
    if linear_solve is not None:        # the reference step refuses it (simulation/simulate.py factory)
        build["linear_solve"] = linear_solve
    r = sim.run(scene, start, np.zeros(robot.nv), duration, dt, controller,
                sim.factory(step_kind, solver, tol, max_iter, **build), baumgarte)
    h = r.base_height()
    click.echo(f"{len(r.statuses)} steps of {dt:g} s, {r.status}" + (f"; base height {h[-1]:.6f} m" if h is not None else ""))
    _write(r, out_dir, write_csv, plot)
    if r.status == sim.INTERRUPTED:
        sys.exit(130)
    if not r.completed:
        sys.exit(1)


# what an MJCF model states in its own file (cd.mujoco_rollout reads it), and what only an MJCF run takes
MJCF_OWN = {"--contact", "--scenario", "--dt", "--drop", "--kp", "--kd", "--gains", "--mu", "--normal", "--height", "--solver",
            "--step", "--baumgarte", "--linear-solve", "--tol", "--max-iter", "--fixed-base/--floating-base"}
MJCF_ONLY = {"--ctrl", "--keyframe"}


def _given(ctx):
    """The options of this call given on the command line, by their first long flag."""
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params}
    flags.update(fixed_base="--fixed-base/--floating-base")
    return {flags[n] for n in ctx.params if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}


def _simulate_mjcf(model_path, given, duration, q0, ctrl, keyframe, out_dir, build_dir):
    """The MJCF model at ``model_path`` on cd.mujoco_rollout (mujoco/simulate.py): its CSV and figure."""
    from ..mujoco.simulate import plot, simulate_model, write_csv
    if given & MJCF_OWN:
        raise InputError(f"{', '.join(sorted(given & MJCF_OWN))}: an MJCF model takes these from its own file "
                         f"(time step, contacts, solver, actuators); give --ctrl, --keyframe or --q0")
    traj = simulate_model(model_path, duration, None if ctrl is None else numbers(ctrl, "--ctrl"),
                          None if q0 is None else numbers(q0, "--q0"), keyframe, out_dir=build_dir)
    click.echo(f"{len(traj.sensordata)} steps of {traj.dt:g} s (the model's), {traj.status}")
    _write(traj, out_dir, write_csv, plot)
    if traj.diverged:
        sys.exit(1)


def _write(trajectory, out_dir, write_csv, plot):
    """rollout.csv (first, atomically) and rollout.png in ``out_dir``; a figure that fails says the CSV was written."""
    csv_path = write_csv(trajectory, f"{out_dir}/rollout.csv")
    try:
        png_path = plot(trajectory, f"{out_dir}/rollout.png")
    except OutputError as exc:
        raise OutputError(f"wrote {csv_path}; {exc}") from None
    click.echo(f"wrote {csv_path} and {png_path}")
