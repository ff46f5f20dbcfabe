"""``library``: one function per contact mode and a dispatcher over the mask of active constraints."""
from __future__ import annotations

import click

from .. import report
from ..executor import CONNECT_TIMEOUT_S, connect
from ..registry import AUTO
from .main import cli
from .options import (ROBOT_HELP, cflag_tuple, cse_opt, finite_positive, gen_opts, jobs_opt, osim_opt, resolve, target_opts,
                      with_options)


@cli.command(epilog=ROBOT_HELP)
@with_options(target_opts)
@click.option("-a", "--algorithm", default=AUTO, show_default=True, metavar="ALGO",
              help="per mode: 'auto' (the fewest instructions among the Delassus algorithms), a Delassus algorithm, a "
                   "dynamics solver or auto_hard (pv|ltl) / auto_soft (pv_soft|ltl_soft), an operator or auto_apply / "
                   "auto_damped (matrix-free or explicit)")
@click.option("--modes", multiple=True, metavar="all|N-of-k|MODE|FILE",
              help="the contact modes: all (default: every subset), N-of-k (every set of N of the k constraints), one "
                   "mode (a mask such as 0x5, or constraints joined by commas, '-' for none), or a file with one mode "
                   "per line (repeatable)")
@osim_opt
@cse_opt
@with_options(gen_opts)
@jobs_opt
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="build on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); results come back here (a "
                   "peer that does not answer as a Dask scheduler within --cluster-timeout is refused)")
@click.option("--cluster-timeout", default=CONNECT_TIMEOUT_S, show_default=True, metavar="SECONDS",
              type=float, callback=finite_positive,
              help="seconds to wait for the Dask scheduler's first words before refusing the peer")
@click.option("--package", "package_dir", default=None, metavar="DIR",
              help="also write the library's C package (dispatcher, every mode, Makefile, CMakeLists.txt, example) to DIR")
def library(robot, fixed_base, scenario, specs, algorithm, modes, osim, cse, out_dir, cflags, cc, force, name, jobs, cluster,
            cluster_timeout, package_dir):
    """One function per contact mode (subset of the constraints, bit i = the i-th given) and a
    dispatcher over the mask of active constraints, built on all cores or a Dask cluster.
    Unchanged modes come from the cache; an interrupted build resumes with the missing ones."""
    from ..contact_modes import library as make_library
    t = resolve(robot, scenario, specs, fixed_base)
    with connect(cluster, cluster_timeout) as client:
        lib = make_library(t.robot, t.constraints, algorithm, modes=list(modes) or "all", out_dir=out_dir,
                           cflags=cflag_tuple(cflags), cc=cc, cse=cse, osim=osim, force=force, name=name, jobs=jobs,
                           client=client, package=package_dir)
    m = lib.manifest
    rows = [[md["name"], f"{md['mask']:#x}", ", ".join(md["active"]) or "(none)", md["m"], md["algorithm"] or "-",
             md["instructions"], md.get("so_bytes"), "-" if not md["function"] else "cached" if md["reused"] else "built"]
            for md in m["modes"]]
    click.echo(report.table(rows, ["mode", "mask", "active constraints", "m", "algorithm", "instructions", ".so bytes", ""]))
    b = m["build"]
    click.echo(f"library {m['library']}: {len(rows)} modes ({b['functions']} functions), {b['built']} built"
               + (f" in {b['seconds']:.1f} s on {b['where']}" if b["built"] else "") + f", {b['reused']} from the cache"
               + (f" ({b['kept']} modes kept from the library already there)" if b.get("kept") else ""))
    click.echo(f"-> {lib.manifest_path.with_suffix('.{c,h,json}')}")
    if package_dir:
        click.echo(f"C package -> {package_dir} (make -j, or cmake -S {package_dir} -B build; see its README.md)")
