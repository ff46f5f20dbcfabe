"""``demo``: Talos with both soles welded, generated, compiled and checked."""
from __future__ import annotations

import time

import click

from .. import api
from ..errors import DelassusError
from ..model import load_robot
from ..registry import AUTO
from ..verify.check import DEFAULT_TOL, check_delassus
from .main import cli


@cli.command()
@click.option("-o", "--out", "out_dir", default=str(api.DEFAULT_OUT), show_default=True)
@click.option("--samples", default=100, show_default=True)
def demo(out_dir, samples):
    """Talos (talos_full_v2, nv = 50), both soles welded: generate, compile, check."""
    robot = load_robot("talos")
    click.echo(f"robot: {robot.name} ({robot.source}), nq = {robot.nq}, nv = {robot.nv}, floating base")
    click.echo(f"constraints (scenario 2F): {', '.join(robot.scenarios['2F'])}")
    t0 = time.perf_counter()
    f = api.generate(robot, "2F", AUTO, out_dir=out_dir)
    m = f.manifest
    click.echo(f"algorithm: auto -> {m['auto']['chosen']}, the {m['auto']['reason']}")
    click.echo(f"generated + compiled in {time.perf_counter() - t0:.1f} s ({' '.join(m['cflags'])})")
    ops = m["op_count"]
    click.echo(f"op count ({m['auto']['chosen']}): {ops['instructions']:,} instructions, {ops['flops']:,} flops "
               f"(add {ops['ops']['add']:,}, mul {ops['ops']['mul']:,}, div {ops['ops']['div']:,}), cse = {m['cse']}")
    err = check_delassus(f, robot, f.constraints, samples=samples)
    click.echo(f"max relative error vs NumPy reference over {samples} random q: {err:.2e}")
    if err > DEFAULT_TOL:
        raise DelassusError(f"check failed: {err:.2e} > {DEFAULT_TOL:g}")
    click.echo("files:")
    for ext in ("c", "h", "so", "json"):
        p = f.so_path.with_suffix("." + ext)
        click.echo(f"  {p} ({p.stat().st_size:,} bytes)")
    click.echo("use it from Python:")
    click.echo("  import casadi_delassus as cd, numpy as np")
    click.echo(f"  f = cd.load('{f.manifest_path}')")
    click.echo("  D = f(np.r_[0, 0, 1, 0, 0, 0, 1, np.zeros(44)])   # 12 x 12 Delassus matrix")
