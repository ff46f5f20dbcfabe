"""The command group and the entry point: every refusal one line on stderr and exit 2, Ctrl-C 130, SIGTERM 143."""
from __future__ import annotations

import signal
import sys
import warnings

import click

from .. import progress
from ..errors import DelassusError
from ..names import printable
from ..runtime.door import DoorWarning


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or heartbeat lines on stderr (errors still show).")
def cli(quiet):
    """Generate operation-counted, compiled C for Delassus-matrix algorithms.

    ROBOT (every command that takes one) is a registry name (see `robots`), a model file —
    URDF (.urdf, or .xml with a <robot> root; --fixed-base/--floating-base), SDF (.sdf),
    Featherstone spatial_v2 JSON (.json), MJCF (.xml with a <mujoco> root, compiled by MuJoCo
    when the mjcf extra is installed; q = its qpos) — or a synthetic spec such as chain:n=20,
    stem:n=10,branches=4,length=7, kchain:k=5, ladder:rungs=4.  `links ROBOT` lists its joints
    (with the q layout) and the link, frame and site names constraints may use.  Long work shows
    progress on stderr; `--quiet` (or CASADI_DELASSUS_QUIET=1) turns it off."""
    progress.quiet(quiet)


class Terminated(BaseException):
    """SIGTERM, raised so that every ``finally`` and cleanup runs as for Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None):
    """Run the command line ``argv`` (default sys.argv) with SIGTERM turned into cleanup."""
    warnings.filterwarnings("ignore", category=DoorWarning)     # the CLI's own calls need no fast door
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:          # not the main thread: leave signals to the caller
        return _main(argv)
    try:
        _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv):
    try:
        cli.main(args=argv, prog_name="casadi-delassus", standalone_mode=False)
    except Terminated:
        click.echo("terminated", err=True)
        sys.exit(128 + signal.SIGTERM)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:         # one line, as every other refusal
        where = exc.ctx.command_path if exc.ctx else "casadi-delassus"
        click.echo(f"error: {printable(exc.format_message())} (see {where} --help)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except DelassusError as exc:
        click.echo(f"error: {printable(exc)}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
