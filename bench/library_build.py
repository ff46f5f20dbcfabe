"""Contact-mode libraries (casadi_delassus/contact_modes/): build times and checks.

    python bench/library_build.py [--part go1|talos16|talos256 ...] [--samples 20] [--talos256-algorithm auto]

- go1: go1 with four 3D feet (scenario 4F3, 16 modes, algorithm auto) from an empty cache,
  on 1 process, on every core, and on a local Dask cluster of 2 worker processes (one
  thread each; its start-up is timed apart), side by side;
- talos16: talos with feet and hands welded (2F+2H, 16 modes) built on every core, every mode
  checked through the dispatcher against the NumPy reference and the directly generated
  function over --samples random configurations;
- talos256: talos with four 3D points per sole (2F4x3, 8 constraints, 256 modes) on every
  core: time, total .so size, the cheapest and the most expensive mode, which algorithm
  auto picked how often, and every mode checked against the NumPy reference.

Writes bench/results/library_build.md (each part's section replaced when it is rerun).
"""
from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from collections import Counter

from common import RESULTS

from casadi_delassus import load_robot
from casadi_delassus.executor import cores
from casadi_delassus.contact_modes import library
from casadi_delassus.verify.library_check import check_library

OUT = RESULTS / "library_build.md"


ROOT = {"dir": None}          # this run's temporary folder (main)
ALGORITHM = {"talos256": "auto"}     # --talos256-algorithm


def build(robot, scenario, algorithm="auto", **kw):
    """(Library, wall seconds) from an empty output folder of its own."""
    t0 = time.perf_counter()
    lib = library(robot, scenario, algorithm, out_dir=tempfile.mkdtemp(dir=ROOT["dir"]), **kw)
    seconds = time.perf_counter() - t0
    lib.so_bytes = sum(md.get("so_bytes") or 0 for md in lib.manifest["modes"])
    lib.sums = {k: sum(md["timings_s"][k] for md in lib.manifest["modes"] if md["function"]) for k in ("trace", "compile")}
    return lib, seconds


def part_go1(samples):
    robot = load_robot("go1")
    rows = []
    lib, t = build(robot, "4F3", jobs=1)
    rows.append(["1 process (this one)", f"{t:.1f}", "—"])
    base = t
    lib, t = build(robot, "4F3", jobs=cores())
    rows.append([f"{cores()} local processes (all cores)", f"{t:.1f}", f"{base / t:.2f}×"])
    from distributed import Client, LocalCluster
    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        up = time.perf_counter() - t0
        lib, t = build(robot, "4F3", client=client)
    rows.append([f"local Dask cluster, 2 worker processes (+{up:.1f} s to start it)", f"{t:.1f}", f"{base / t:.2f}×"])
    modes = lib.manifest["modes"]
    text = [f"go1, four 3D feet (4F3): {len(modes)} modes ({sum(1 for m in modes if m['function'])} functions, "
            f"the empty one has none), `-a auto`, from an empty cache.", "",
            "| where | wall s | speed-up |", "| --- | --- | --- |", *[f"| {' | '.join(r)} |" for r in rows], "",
            f"Per mode (last build): trace (auto traces every candidate) {lib.sums['trace']:.1f} s and gcc "
            f"{lib.sums['compile']:.1f} s in total; .so files {lib.so_bytes / 1e6:.2f} MB; "
            + ", ".join(f"{a} {n}" for a, n in Counter(m["algorithm"] for m in modes if m["function"]).most_common())
            + " modes."]
    return text


def _check_rows(lib, robot, samples, direct=True):
    rows, ok = [], True
    for c in check_library(lib, robot, samples=samples, direct=direct):
        md = lib.modes[c.mask]
        ok &= c.passed
        rows.append(f"| {md['name']} | {', '.join(md['active']) or '(none)'} | {md['m']} | {md['algorithm'] or '—'} | "
                    f"{md['instructions']:,} | {c.worst('reference'):.1e} | "
                    + (f"{c.worst('direct'):.1e} | " if direct else "") + f"{'ok' if c.passed else 'FAIL'} |")
    return rows, ok


def part_talos16(samples):
    robot = load_robot("talos")
    lib, t = build(robot, "2F+2H", jobs=cores())
    rows, ok = _check_rows(lib, robot, samples)
    return [f"talos, feet and hands welded (2F+2H): {len(rows)} modes built in {t:.1f} s on {cores()} local processes "
            f"(.so files {lib.so_bytes / 1e6:.2f} MB); every mode through the dispatcher against the NumPy reference and "
            f"the function traced directly for its contact set (evaluated by CasADi), {samples} random q each, largest "
            f"relative error: {'all pass' if ok else 'FAILURES'}.", "",
            "| mode | active | m | algorithm | instructions | vs reference | vs direct | |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows]


def part_talos256(samples):
    robot = load_robot("talos")
    lib, t = build(robot, "2F4x3", ALGORITHM["talos256"], jobs=cores())
    modes = [m for m in lib.manifest["modes"] if m["function"]]
    cheap, dear = min(modes, key=lambda m: m["instructions"]), max(modes, key=lambda m: m["instructions"])
    rows, ok = _check_rows(lib, robot, samples, direct=False)
    won = Counter(m["algorithm"] for m in modes).most_common()
    return [f"talos, four 3D points per sole (2F4x3, 8 constraints): {len(lib.modes)} modes, `-a {ALGORITHM['talos256']}`, from an empty "
            f"cache on {cores()} local processes: **{t / 60:.1f} min** (trace {lib.sums['trace'] / 60:.1f} min and gcc "
            f"{lib.sums['compile'] / 60:.1f} min of CPU in total).", "",
            f"- total .so size: {lib.so_bytes / 1e6:.1f} MB ({lib.so_bytes / len(modes) / 1e3:.0f} kB per mode)",
            f"- cheapest mode: {cheap['name']} ({', '.join(cheap['active'])}, m = {cheap['m']}): {cheap['algorithm']}, "
            f"{cheap['instructions']:,} instructions",
            f"- most expensive: {dear['name']} (m = {dear['m']}): {dear['algorithm']}, {dear['instructions']:,} instructions",
            "- algorithms: " + ", ".join(f"{a} {n}" for a, n in won),
            f"- every mode against the NumPy reference, {samples} random q each: {'all pass' if ok else 'FAILURES'} "
            f"(largest relative error {max(float(r.split('|')[6]) for r in rows):.1e})"]


PARTS = {"go1": part_go1, "talos16": part_talos16, "talos256": part_talos256}


def write(part, lines, command):
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = OUT.read_text() if OUT.is_file() else "# Contact-mode libraries: build times and checks\n"
    load = os.getloadavg()[0]
    section = "\n".join([f"## {part}", "", f"`{command}` ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
                         f"load average {load:.1f} at the end; provisional: shared machine)", "", *lines, ""])
    pattern = re.compile(rf"^## {part}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(section + "\n", text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + section
    OUT.write_text(text)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", action="append", choices=list(PARTS))
    p.add_argument("--samples", type=int, default=20, help="random configurations per mode (checks)")
    p.add_argument("--talos256-algorithm", default="auto", help="the 256-mode library's algorithm (auto traces every "
                   "Delassus algorithm per mode: about 20 s of tracing per talos mode)")
    args = p.parse_args()
    ALGORITHM["talos256"] = args.talos256_algorithm
    for part in args.part or list(PARTS):
        with tempfile.TemporaryDirectory(prefix="library-bench-") as ROOT["dir"]:
            lines = PARTS[part](args.samples)
        print("\n".join(lines), flush=True)
        extra = f" --talos256-algorithm {args.talos256_algorithm}" if part == "talos256" else ""
        write(part, lines, f"python bench/library_build.py --part {part} --samples {args.samples}{extra}")
        print(f"-> {OUT}")
