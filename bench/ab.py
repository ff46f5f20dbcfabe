"""The command line the A/B benches share (bench/rollout_ab.py, bench/step_ab.py): ``build --out DIR`` builds with the
package on PYTHONPATH; ``time FOLDER... [--copies] [--reps] [--calls] [--tmp]`` times the builds side by side."""
from __future__ import annotations

import argparse
from pathlib import Path


def main(doc, build, time_builds, heading, copies, reps, calls, tmp):
    """Parse the command line (``doc``: the bench's docstring; the defaults of ``time``'s options) and run ``build(out)``
    or print ``heading`` (a format string of the options: {copies}, {reps}, {calls}) and the lines of
    ``time_builds(folders, copies, reps, calls, tmp)``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    t = sub.add_parser("time")
    t.add_argument("folders", nargs="+")
    t.add_argument("--copies", type=int, default=copies)
    t.add_argument("--reps", type=int, default=reps)
    t.add_argument("--calls", type=int, default=calls)
    t.add_argument("--tmp", default=tmp)
    args = ap.parse_args()
    if args.command == "build":
        build(args.out)
        return
    Path(args.tmp).mkdir(parents=True, exist_ok=True)
    print(heading.format(**vars(args)))
    print("\n".join(time_builds(args.folders, args.copies, args.reps, args.calls, args.tmp)))
