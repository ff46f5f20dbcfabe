"""The CUDA target's host build (the .cu through the shim, codegen/cuda.py) against the C path:
every function family on go1 4F3, talos 2F, Cassie's loops and a ladder (issue 26, point 1; the
matrix and the cases are tests/codegen/test_cuda.py's and tests/conftest.py's) -- the numbers behind docs/gpu.md:

    nice .venv/bin/python bench/cuda_host_accuracy.py [--case go1-4F3 ...] [--family pv_osim ...]
    .venv/bin/python bench/cuda_host_accuracy.py --summarise LOG ...   # the per-family table of saved output

FP64: max |CUDA − C| / max |C| per configuration against the C batch or single call (whichever is
closer; q as the C path reads it), the largest over 20 configurations; FP32: the same against the
FP64 C batch, beside the error and bound its manifest stores.  A family the C target itself refuses
for a case (an algorithm that does not take Cassie's loop constraints) is listed with its reason."""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "codegen")]

from casadi_delassus.errors import ConstraintError  # noqa: E402
from conftest import case  # noqa: E402
import test_cuda as t  # noqa: E402


def rows(names, families, out, tmp):
    """Yield (case, family, errors or None, refusal or None) for each pair."""
    for name in names:
        robot, _ = case(name)
        for label in families:
            try:
                functions = t.family_functions(name, label, out)
            except ConstraintError as exc:
                yield name, label, None, str(exc).splitlines()[0]
                continue
            yield name, label, t.family_errors(functions, robot, tmp), None


def summary(results, names):
    """Per family and case, the worst over its functions: FP64 error (and what it may be where
    that is more than 1e-15) / FP32 error (its bound), or why the C target refuses it; ``results``:
    (case, family, function, fp64, allowed, fp32, stored, bound) rows and (case, family, refusal) ones."""
    cells = {}
    for r in results:
        if len(r) == 3:
            cells[r[:2]] = "refused (loop rows)" if "one link and the world only" in r[2] else f"refused: {r[2][:60]}"
            continue
        new = ((r[3], r[4]), (r[5], r[7]))
        old = cells.get(r[:2], new)
        cells[r[:2]] = tuple(max(a, b, key=lambda x: x[0] / x[1]) for a, b in zip(old, new))
    measured = [r for r in results if len(r) == 8]
    worst64, worst32 = max(measured, key=lambda r: r[3] / r[4]), max(measured, key=lambda r: r[5] / r[7])
    print(f"\nworst FP64 error / allowed {worst64[3] / worst64[4]:.2f} ({worst64[3]:.1e}, {worst64[0]} {worst64[2]}); "
          f"worst FP32 error / bound {worst32[5] / worst32[7]:.2f} ({worst32[0]} {worst32[2]}); "
          f"{len(results) - len(measured)} pairs refused by the C target")
    print("\n| family | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for label in sorted(dict.fromkeys(r[1] for r in results), key=list(t.FAMILIES).index):
        row = [cells.get((name, label), "not run") for name in names]
        print(f"| {label} | " + " | ".join(c if isinstance(c, str) else _cell(*c) for c in row) + " |")


def _cell(fp64, fp32):
    allowed = f" ≤ {fp64[1]:.1e}" if fp64[1] > t.FP64_TOL else ""
    return f"{fp64[0]:.1e}{allowed} / {fp32[0]:.1e} ({fp32[1]:.1e})"


def read_log(paths):
    """The result rows of this script's printed tables in ``paths`` (an older table without the
    FP64 allowed column: 1e-15 allowed); a later row of the same case, family and function
    replaces an earlier one."""
    results = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) not in (7, 8) or cells[0] not in t.MATRIX_CASES:
                continue
            if cells[2].startswith("refused by the C target: "):
                results[tuple(cells[:2])] = (cells[0], cells[1], cells[2][len("refused by the C target: "):])
                continue
            numbers = [float(c) for c in cells[3:]]
            results[tuple(cells[:3])] = (*cells[:3], *(numbers if len(cells) == 8 else [numbers[0], t.FP64_TOL, *numbers[1:]]))
    return list(results.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", choices=t.MATRIX_CASES, help="default: all four")
    parser.add_argument("--family", action="append", choices=list(t.FAMILIES), help="default: all")
    parser.add_argument("--summarise", nargs="+", metavar="LOG", help="instead: the per-family table of earlier runs' output")
    args = parser.parse_args(argv)
    if args.summarise:
        results = read_log(args.summarise)
        return summary(results, [n for n in t.MATRIX_CASES if any(r[0] == n for r in results)])
    out, tmp = ROOT / "codegen_out", Path(tempfile.mkdtemp())
    print("| case | family | function | FP64 error | FP64 allowed | FP32 error | FP32 stored max | FP32 bound |\n"
          "|---|---|---|---|---|---|---|---|", flush=True)
    results = []
    for name, label, errors, refusal in rows(args.case or t.MATRIX_CASES, args.family or t.FAMILIES, out, tmp):
        if refusal:
            results.append((name, label, refusal))
            print(f"| {name} | {label} | refused by the C target: {refusal[:120]} | | | | | |", flush=True)
            continue
        for function, fp64, allowed, fp32, stored, bound in errors:
            print(f"| {name} | {label} | {function} | {fp64:.1e} | {allowed:.1e} | {fp32:.1e} | {stored:.1e} | "
                  f"{bound:.1e} |", flush=True)
            results.append((name, label, function, fp64, allowed, fp32, stored, bound))
    summary(results, args.case or t.MATRIX_CASES)


if __name__ == "__main__":
    main()
