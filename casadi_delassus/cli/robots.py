"""``robots`` (the registry's robots) and ``links`` (one model's joints, bodies, frames and sites)."""
from __future__ import annotations

import click

from .. import report
from ..errors import DelassusError
from ..model import load_robot, registry
from ..names import printable
from .main import cli
from .options import ROBOT_HELP, base_opt, floating, robot_arg, with_options


@cli.command()
def robots():
    """List the named robots with their sizes and constraint scenarios."""
    rows = []
    for name in registry.names():
        try:
            r = load_robot(name)
            rows.append([name, r.nq, r.nv, r.n_bodies, r.depth(), ", ".join(r.scenarios)])
        except DelassusError as exc:
            rows.append([name, None, None, None, None, f"unavailable: {exc}"])
    click.echo(report.table(rows, ["robot", "nq", "nv", "bodies", "depth", "scenarios"]))


@cli.command(epilog=ROBOT_HELP)
@with_options([robot_arg, base_opt])
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def links(robot, fixed_base, fmt):
    """List the model's joints in q order (type, nq, nv, their q and v ranges and q entries) and
    the names constraints may use: bodies, frames (links merged by fixed joints, named frames)
    and sites, each with the body it rides on."""
    from ..model.links import FRAME_HEADERS, JOINT_HEADERS, MIMIC_NOTE, describe_links, frame_rows, joint_rows
    info = describe_links(load_robot(robot, floating_base=floating(fixed_base)))
    if fmt == "json":
        click.echo(report.dumps(info))
        return
    click.echo(printable(f"{info['robot']}: nq = {info['nq']}, nv = {info['nv']}, {info['base']} ({info['source']})"))
    click.echo("joints (q layout):")
    click.echo(report.table(joint_rows(info), JOINT_HEADERS))
    if any(j["mimic"] for j in info["joints"]):
        click.echo(MIMIC_NOTE)
    click.echo("bodies, frames and sites (constraint names, e.g. -c NAME:6d):")
    click.echo(report.table(frame_rows(info), FRAME_HEADERS))
