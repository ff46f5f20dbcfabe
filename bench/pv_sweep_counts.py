"""Instruction counts of the PV-family Delassus algorithms sweep by sweep, on the papers'
Talos model with its four 6D runtime-input constraints (../shared/anchors/README.md).

Each pass the algorithm records (symbolic/passes.py) is counted as the SX Function whose
outputs are everything recorded so far (opcount.pass_counts: cumulative, so shared
sub-expressions are charged to the first pass that needs them); the rows give the increments,
with and without CasADi's cse.

    python bench/pv_sweep_counts.py [model.json]
"""
import sys

import casadi as ca
from common import ANCHOR_JSON, ANCHOR_SPECS, instructions

from casadi_delassus import load_robot
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.opcount import pass_counts
from casadi_delassus.registry import get_algorithm
from casadi_delassus.symbolic import passes

PAPER = {"pv_osim": 19949, "pv_osimr": 21126}


def report(name, robot, cs):
    q = ca.SX.sym("q", robot.nq)
    Ksym = [ca.SX.sym(c.input_name, c.rows, 6) for c in cs.inputs]
    it = iter(Ksym)
    K = [c.K_body(next(it)) if c.is_input else c.K_body() for c in cs.constraints]
    with passes.recording() as recorded:
        outputs = get_algorithm(name).fn(robot, cs, q, K)
    if name == "pv_osim":          # its last pass is the output itself: the update at the base
        recorded.append(("base: Λ⁻¹ = L_b^A + K_b^A (H_b^A)⁻¹ K_b^Aᵀ (eq. 48, D_b factored)", outputs["delassus"]))
    elif name == "pv_osimr":
        recorded.append(("CEMPs along N (19) + assembly (13)", outputs["delassus"]))
    else:
        recorded.append(("checking output: Λ", outputs["osim"]))
    total = {c: instructions(robot, cs, name, cse=c) for c in (True, False)}
    print(f"\n{name}: {total[True]:,} instructions with cse, {total[False]:,} without"
          + (f" (paper's implementation {PAPER[name]:,}: {total[True] / PAPER[name]:.3f}x)" if name in PAPER else ""))
    counts = {c: pass_counts(recorded, [q, *Ksym], cse=c) for c in (True, False)}
    for (label, n), (_, n_nocse) in zip(counts[True], counts[False]):
        print(f"  {label:48s} {n:7,d}   (no cse {n_nocse:7,d})")


def main(path=ANCHOR_JSON):
    robot = load_robot(str(path))
    cs = ConstraintSet.parse(robot, ANCHOR_SPECS)
    for name in ("pv_osim", "pv_osimr", "pv_osim_fast"):
        report(name, robot, cs)


if __name__ == "__main__":
    main(*sys.argv[1:])
