"""Instruction counts of the PV-family Delassus algorithms sweep by sweep, on the papers'
Talos model with its four 6D runtime-input constraints (../shared/anchors/README.md).

Each stage is counted as the SX Function whose outputs are everything computed so far
(cumulative, so shared sub-expressions are charged to the first stage that needs them);
the rows give the increments, with and without CasADi's cse.

    python bench/pv_sweep_counts.py [model.json]
"""
import sys
from pathlib import Path

import casadi as ca

from casadi_delassus import load_robot
from casadi_delassus.delassus import pv_osim, pv_osim_fast, pv_osimr
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet

ANCHOR = Path(__file__).resolve().parents[2] / "shared" / "anchors" / "talos_spatial_v2_model.json"
SPECS = ["leg_left_6_link:6d-input", "leg_right_6_link:6d-input",
         "gripper_left_motor_double_link:6d-input", "gripper_right_motor_single_link:6d-input"]
PAPER = {"pv_osim": 19949, "pv_osimr": 21126}


def flat(x):
    if isinstance(x, dict):
        return [e for v in x.values() for e in flat(v)]
    if isinstance(x, (list, tuple)):
        return [e for v in x for e in flat(v)]
    if isinstance(x, ca.SX):                  # exact constants (0, ±1) are not work
        return [x[k] for k in range(x.numel()) if not x[k].is_constant()]
    if isinstance(x, pv_osimr.FactoredOmega):
        return flat([x.J.ldl[0], x.J.ldl[2]])
    return []


def count(args, exprs, cse):
    exprs = [ca.vertcat(*[ca.SX(e) for e in exprs])] if exprs else [ca.SX(0)]
    return count_ops(ca.Function("f", args, ca.cse(exprs) if cse else exprs))["instructions"]


def report(name, args, stages, total):
    print(f"\n{name}: {total['cse']:,} instructions with cse, {total['nocse']:,} without"
          + (f" (paper's implementation {PAPER[name]:,}: {total['cse'] / PAPER[name]:.3f}x)" if name in PAPER else ""))
    acc, prev = [], {True: 0, False: 0}
    for label, exprs in stages:
        acc += flat(exprs)
        now = {c: count(args, acc, c) for c in (True, False)}
        print(f"  {label:48s} {now[True] - prev[True]:7,d}   (no cse {now[False] - prev[False]:7,d})")
        prev = now


def main(path=ANCHOR):
    robot = load_robot(str(path))
    cs = ConstraintSet.parse(robot, SPECS)
    q = ca.SX.sym("q", robot.nq)
    Ksym = [ca.SX.sym(c.input_name, c.rows, 6) for c in cs.inputs]
    args = [q, *Ksym]
    it = iter(Ksym)
    K = [c.K_body(next(it)) if c.is_input else c.K_body() for c in cs.constraints]
    totals = {a: {k: count_ops(trace(robot, cs, a, cse=c)[0])["instructions"] for k, c in (("cse", True), ("nocse", False))}
              for a in ("pv_osim", "pv_osimr", "pv_osim_fast")}
    on_path = set(b for c in cs.constraints for b in robot.ancestors(c.body))

    def abi_stage(abi):
        # Ū_i (x·(1/D) becomes x/D in CasADi, so 1/D itself is never needed) and H_b^A; D_b is
        # factored by the stage that uses it (in the basis that suits it)
        return [J.Ubar if not J.free else J.HA for i, J in enumerate(abi) if i in on_path]

    # PV-OSIM
    s = pv_osim.sweeps(robot, cs, q, K, free_update_=False)
    full = dict(s["L"])
    bases = [i for i, J in enumerate(s["abi"]) if J.free and s["stack"][i][0]]
    for i in bases:
        pv_osim.free_update(full, s["stack"][i][0], s["abi"][i], s["stack"][i][1], pv_osim.lead_rows(s["T"], s["via"][i]))
    report("pv_osim", args, [
        ("articulated inertias H^A", abi_stage(s["abi"])),
        ("constraint rows K^A propagated to the base", [s["stack"][i][1] for i in bases]),
        ("L^A: SR1 updates K S D⁻¹ Sᵀ Kᵀ", dict(s["L"])),
        ("base: Λ⁻¹ = L_b^A + K_b^A (H_b^A)⁻¹ K_b^Aᵀ (eq. 48, D_b factored)", full)], totals["pv_osim"])
    # PV-OSIMr
    r = pv_osimr.sweeps(robot, cs, q, K)
    report("pv_osimr", args, [
        ("articulated inertias H^A", abi_stage(r["abi"])),
        ("backward: ^λK_D, ^λΩ_D between branching links (16-17)", [r["top"], r["omega0_backward"]]),
        ("forward over N: ^0Ω_i (eq. 18)", r["omega0"]),
        ("CEMPs along N (19) + assembly (13)", pv_osimr.assemble(cs, r)["delassus"])], totals["pv_osimr"])
    # PV-OSIM-fast
    f = pv_osim_fast.factors(robot, cs, q, K)
    s, checks = f["sweeps"], pv_osim_fast.check_outputs(f)
    report("pv_osim_fast", args, [
        ("articulated inertias H^A", abi_stage(s["abi"])),
        ("constraint rows K^A propagated to the base", [s["stack"][i][1] for i in bases]),
        ("L_b^A: SR1 updates", dict(s["L"])),
        ("factors: LDLᵀ of L_b^A, schur and its LDLᵀ (eq. 55)", [f["Lb_ldl"], f["K_b"], f["schur_ldl"]]),
        ("checking output: Λ⁻¹", checks["delassus"]),
        ("checking output: Λ", checks["osim"])], totals["pv_osim_fast"])


if __name__ == "__main__":
    main(*sys.argv[1:])
