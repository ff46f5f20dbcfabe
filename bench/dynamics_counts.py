"""Operation counts of the constrained-dynamics solvers on the papers' Talos model against the
papers' own implementation (../shared/anchors/README.md: K = I₆ on gripper_right_motor_single_link,
leg_left_6_link, gripper_left_inner_single_link, leg_right_6_link; outputs v̇ incl. the base), with
a sweep-by-sweep breakdown (each sweep's results recorded as the solver builds them, counted as
the cumulative Function minus the previous one; CasADi's cse applied, as in the generated code),
and the registry scenarios for context.

    .venv/bin/python bench/dynamics_counts.py [--registry]

Writes bench/results/dynamics_anchor.{md,csv} (totals and ratios),
dynamics_anchor_sweeps.{md,csv} (breakdown) and, with --registry, dynamics_registry.{md,csv}.
"""
from __future__ import annotations

import argparse

import casadi as ca
from common import ANCHOR_JSON, DYNAMICS_ANCHOR_SPECS, instructions, write

from casadi_delassus import load_robot
from casadi_delassus.registry import VECTOR_INPUTS, get_algorithm
from casadi_delassus.symbolic import passes
from casadi_delassus.api import constraint_set
from casadi_delassus.opcount import count_ops, pass_counts
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import registry

ANCHORS = {"pv": 31176, "pv_early": 23442, "pv_soft": 18072, "ltl": 49068, "ltl_soft": 36526}


def sweeps(robot, cs, name):
    """[(sweep, instructions)] from the passes the solver records (symbolic/passes.py)."""
    algo = get_algorithm(name)
    q = ca.SX.sym("q", robot.nq)
    sizes = {"nv": robot.nv, "m": cs.m}
    vec = {n: ca.SX.sym(n, sizes[VECTOR_INPUTS[n][0]]) for n in algo.inputs}
    with passes.recording() as recorded:
        out = algo.fn(robot, cs, q, [c.K_body() for c in cs.constraints], **vec)
    recorded.append(("outputs (v̇, λ)", list(out.values())))
    return pass_counts(recorded, [q, *vec.values()])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--registry", action="store_true", help="also count every registry scenario")
    args = ap.parse_args(argv)
    robot = load_robot(str(ANCHOR_JSON))
    cs = ConstraintSet.parse(robot, DYNAMICS_ANCHOR_SPECS)
    rows, srows = [], []
    for name, anchor in ANCHORS.items():
        c = count_ops(trace(robot, cs, name)[0])
        rows.append([name, anchor, c["instructions"], round(c["instructions"] / anchor, 3),
                     "yes" if c["instructions"] <= 0.8 * anchor else "NO", c["flops"], c["ops"]["add"],
                     c["ops"]["mul"], c["ops"]["div"], c["ops"]["sqrt"], c["ops"]["const"]])
        print(rows[-1], flush=True)
        total = 0
        for s, n in sweeps(robot, cs, name):
            srows.append([name, s, n])
            total += n
        srows.append([name, "(sum of the sweeps; the traced function above may differ slightly: "
                            "recording forces a few intermediates)", total])
    aba = instructions(robot, cs, "aba")
    rows.append(["aba (no constraints)", "", aba, "", "", "", "", "", "", "", ""])
    write("dynamics_anchor", rows, ["algorithm", "papers' implementation", "ours", "ratio", "<= 0.8x",
                                    "flops", "add", "mul", "div", "sqrt", "const"],
          f"Constrained dynamics on the papers' Talos model (nv = {robot.nv}, m = {cs.m}, K = I6 on "
          f"{', '.join(s.split(':')[0] for s in DYNAMICS_ANCHOR_SPECS)}): instructions, cse")
    write("dynamics_anchor_sweeps", srows, ["algorithm", "sweep", "instructions"],
          "Sweep-by-sweep breakdown on the papers' Talos model")
    if args.registry:
        rrows = []
        for rname in registry.names():
            if not registry.is_available(rname):
                continue
            r = load_robot(rname)
            for scenario in r.scenarios:
                c, _ = constraint_set(r, scenario)
                rrows.append([rname, scenario, r.nv, c.m,
                              *(instructions(r, c, a) for a in [*ANCHORS, "aba"])])
                print(rrows[-1], flush=True)
        write("dynamics_registry", rrows, ["robot", "scenario", "nv", "m", *ANCHORS, "aba"],
              "Constrained dynamics: instructions on every registry scenario (cse)")


if __name__ == "__main__":
    main()
