"""Instruction counts of every registry algorithm on a fixed set of scenarios, as JSON, and a
before/after comparison of two such files: the guard of a refactoring that must not change
any algorithm's count (issue 12).

Counted per scenario and algorithm (traced SX Function, ``count_ops``' instructions):
``cse`` and ``no_cse``; ``osim`` (Λ through an LDLᵀ of Λ⁻¹ added, cse) for the Delassus
family; ``stages`` (each re-evaluation stage of codegen/staging.py, cse) for every algorithm
with vector inputs; and the choice of ``-a auto``.

    .venv/bin/python bench/opcount_snapshot.py -o counts.json           # ~15 min on 2 cores
    .venv/bin/python bench/opcount_snapshot.py -s "go1 4F3" -a ltl -o part.json     # a subset
    .venv/bin/python bench/opcount_snapshot.py --compare before.json after.json [--subset]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import ANCHOR_JSON, ANCHOR_SPECS, DYNAMICS_ANCHOR_SPECS

from casadi_delassus import load_robot
from casadi_delassus.registry import ALGORITHMS, get_algorithm
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.staging import algorithm_stages, split
from casadi_delassus.codegen.trace import choose_cheapest, trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import DelassusError

# label -> (robot spec, scenario name or constraint specs)
SCENARIOS = {
    "anchor (4 x 6d-input)": (str(ANCHOR_JSON), ANCHOR_SPECS),
    "anchor dynamics (K = I6)": (str(ANCHOR_JSON), DYNAMICS_ANCHOR_SPECS),
    "go1 4F3": ("go1", "4F3"),
    "talos 2F+2H": ("talos", "2F+2H"),
    "ladder:rungs=4": ("ladder:rungs=4", "default"),
    "cassie loops": ("cassie", "loops"),
}


def instructions(f):
    return count_ops(f)["instructions"]


def count_algorithm(robot, cs, name):
    algo = get_algorithm(name)
    if not algo.accepts(cs):
        return {"n/a": "rejects these constraints"}
    try:
        f = trace(robot, cs, name)[0]
    except DelassusError as exc:                     # e.g. redundant constraints for pv / ltl
        return {"n/a": str(exc).split(":")[0]}
    out = {"cse": instructions(f), "no_cse": instructions(trace(robot, cs, name, cse=False)[0])}
    if "delassus" in algo.outputs:
        out["osim"] = instructions(trace(robot, cs, name, osim=True)[0])
    if algo.inputs:
        out["stages"] = {st.name: instructions(st.function)
                         for st in split(f, algorithm_stages(name, list(f.name_in())))}
    return out


def snapshot(labels, algorithms=None):
    result = {}
    for label in labels:
        spec, constraints = SCENARIOS[label]
        robot = load_robot(spec)
        cs = ConstraintSet.parse(robot, robot.scenarios[constraints] if isinstance(constraints, str) else constraints)
        rows = {}
        for name in algorithms or ALGORITHMS:
            t0 = time.perf_counter()
            rows[name] = count_algorithm(robot, cs, name)
            print(f"[{label}] {name}: {rows[name]} ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        if not algorithms:
            rows["auto"] = {"chosen": choose_cheapest(robot, cs)[0]}
        result[label] = rows
    return result


def flatten(snap):
    """{(scenario, algorithm, quantity): value} with stage counts as 'stage <name>'."""
    out = {}
    for label, rows in snap.items():
        for name, counts in rows.items():
            for key, value in counts.items():
                if key == "stages":
                    out.update({(label, name, f"stage {s}"): n for s, n in value.items()})
                else:
                    out[(label, name, key)] = value
    return out


def compare(before, after, subset=False):
    """A Markdown table of every count in either file (``subset``: in AFTER only); returns
    (table, the keys that got worse or changed)."""
    b, a = flatten(before), flatten(after)
    if subset:
        b = {k: v for k, v in b.items() if k in a}
    lines = ["| scenario | algorithm | count | before | after | change |", "| --- | --- | --- | --- | --- | --- |"]
    worse = []
    for key in sorted(set(b) | set(a), key=lambda k: (list(SCENARIOS).index(k[0]) if k[0] in SCENARIOS else 99,
                                                     list(ALGORITHMS).index(k[1]) if k[1] in ALGORITHMS else 99, k[2])):
        x, y = b.get(key), a.get(key)
        if isinstance(x, int) and isinstance(y, int):
            change = "=" if x == y else f"{y - x:+,d} ({(y - x) / x:+.2%})"
            if y > x:
                worse.append(key)
        else:
            change = "=" if x == y else "CHANGED"
            if x != y:
                worse.append(key)
        fmt = (lambda v: f"{v:,}" if isinstance(v, int) else "—" if v is None else str(v))
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {fmt(x)} | {fmt(y)} | {change} |")
    return "\n".join(lines), worse


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", help="write the counts to this JSON file (default: stdout)")
    ap.add_argument("-s", "--scenario", action="append", choices=list(SCENARIOS), help="only these scenarios")
    ap.add_argument("-a", "--algorithm", action="append", choices=list(ALGORITHMS), help="only these algorithms")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two snapshots")
    ap.add_argument("--subset", action="store_true", help="with --compare: only what AFTER counted")
    args = ap.parse_args(argv)
    if args.compare:
        table, worse = compare(*(json.loads(Path(p).read_text()) for p in args.compare), subset=args.subset)
        print(table)
        if worse:
            print(f"\n{len(worse)} counts got worse or changed: {worse}", file=sys.stderr)
            sys.exit(1)
        return
    text = json.dumps(snapshot(args.scenario or list(SCENARIOS), args.algorithm), indent=1)
    if args.output:
        Path(args.output).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
