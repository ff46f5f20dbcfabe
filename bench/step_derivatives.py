"""Accuracy of the contact step's derivatives (contact/step_derivatives.py, issue 27 point 3)
on issue 25's three problems: the dense Jacobian ∂(v_next, λ)/∂(q, v, τ) against central finite
differences of the compiled step (each solve to 1e-12, every contact's mode checked unchanged
within ±h), per block max |ours − FD| / max |FD|, and the JVP/VJP dot-product test over five
random pairs.  talos's eight sole corners leave λ non-unique: v_next's blocks only.

    .venv/bin/python bench/step_derivatives.py [--h 1e-5] [--problems go1_stand go1_slide talos_stand]

Writes bench/results/step_derivatives.md."""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import common  # noqa: F401  (puts the repository on sys.path)
from casadi_delassus.contact import derivative_check as check

RESULTS = Path(__file__).resolve().parent / "results"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--h", type=float, default=1e-5)
    ap.add_argument("--problems", nargs="+", default=["go1_stand", "go1_slide", "talos_stand"])
    ap.add_argument("--out", default="codegen_out")
    args = ap.parse_args()
    rows = ["| problem | modes | worst block | blocks (output/input: error) | dot test |",
            "| --- | --- | --- | --- | --- |"]
    for name in args.problems:
        t0 = time.perf_counter()
        errors, dot, modes = check.check(name, args.out, args.h)
        blocks = ", ".join(f"{o}/{g}: {e:.1e}" for (o, g), e in errors.items())
        kinds = ", ".join(f"{modes.count(m)} {m}" for m in sorted(set(modes)))
        rows.append(f"| {name} | {kinds} | {max(errors.values()):.1e} | {blocks} | {dot:.1e} |")
        print(rows[-1], f"({time.perf_counter() - t0:.0f} s with the builds)", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "step_derivatives.md").write_text(
        f"# Contact step derivatives against central finite differences (h = {args.h:g}, τ: h/dt)\n\n"
        f"`.venv/bin/python bench/step_derivatives.py --h {args.h:g} --problems {' '.join(args.problems)}`\n\n"
        + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
