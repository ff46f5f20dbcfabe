"""Operation counts of the matrix-free operators (delassus_apply, damped_inverse_apply) against
the explicit route through the cheapest explicit Delassus algorithm here (PV-OSIM):
Λ⁻¹ by PV-OSIM then a product Λ⁻¹λ, and Λ⁻¹ by PV-OSIM then an LDLᵀ solve of
(diag(1/R) + Λ⁻¹) a.  All counts with CasADi's cse.  Also the swimmer scaling (the matrix-free
paper's Fig. 2) with the fitted log-log slopes of instructions against the number of links and
against nv.  nv = links + 5 (the free base) while the counts are c·links minus a constant, so
the nv slope over small n overstates the growth; the per-link increment shows it is linear.

    python bench/matrix_free_counts.py            # writes results/matrix_free*.md/.csv
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from common import write

from casadi_delassus.algorithms import get_algorithm, linalg
from casadi_delassus.codegen.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import load_robot

SCENARIOS = [("go2", "4F3"), ("g1", "8F3"), ("talos", "2F"), ("swimmer:n=5", "default"),
             ("boxes:n=3", "default")]


def explicit(robot, cs, base="pv_osim"):
    """(q, lam) -> Λ⁻¹ lam and (q, R, lam) -> (diag(1/R) + Λ⁻¹)⁻¹ lam through the explicit Λ⁻¹."""
    q = ca.SX.sym("q", robot.nq)
    lam, R = ca.SX.sym("lam", cs.m), ca.SX.sym("R", cs.m)
    K = [c.K_body() for c in cs.constraints]
    D = get_algorithm(base).fn(robot, cs, q, K)["delassus"]
    apply_ = ca.Function("explicit_apply", [q, lam], ca.cse([ca.mtimes(D, lam)]))
    upper = linalg.upper_entries(D)
    for i in range(cs.m):
        upper[(i, i)] = upper[(i, i)] + 1 / R[i]
    L, _, dinv = linalg.ldl(upper, cs.m)
    z = linalg.forward_substitute(L, cs.m, [[lam[i]] for i in range(cs.m)])
    x = [None] * cs.m
    for i in reversed(range(cs.m)):
        x[i] = z[i][0] * dinv[i] - linalg._dot((L.get((k, i), 0), x[k]) for k in range(i + 1, cs.m))
    solve = ca.Function("explicit_damped", [q, R, lam], ca.cse([ca.vertcat(*x)]))
    return apply_, solve


def scenario(spec, sc):
    robot = load_robot(spec)
    return robot, ConstraintSet.parse(robot, robot.scenarios[sc])


def main():
    rows = []
    for spec, sc in SCENARIOS:
        robot, cs = scenario(spec, sc)
        mf = {a: count_ops(trace(robot, cs, a)[0])["instructions"] for a in ("delassus_apply", "damped_inverse_apply")}
        ea, ed = (count_ops(f)["instructions"] for f in explicit(robot, cs))
        rows.append([f"{spec} {sc}", robot.nv, cs.m, mf["delassus_apply"], ea, ea / mf["delassus_apply"],
                     mf["damped_inverse_apply"], ed, ed / mf["damped_inverse_apply"]])
    write("matrix_free", rows, ["scenario", "nv", "m", "delassus_apply", "pv_osim+product", "ratio",
                                "damped_inverse_apply", "pv_osim+LDLᵀ solve", "ratio"],
          "Matrix-free operators vs explicit PV-OSIM (instructions, cse)")
    rows, nv, counts = [], [], {"delassus_apply": [], "damped_inverse_apply": []}
    for n in (5, 10, 20, 50, 100):
        robot, cs = scenario(f"swimmer:n={n}", "default")
        nv.append(robot.nv)
        row = [n, robot.nv, cs.m]
        for a in counts:
            counts[a].append(count_ops(trace(robot, cs, a)[0])["instructions"])
            row.append(counts[a][-1])
        rows.append(row)
    links = [r[0] for r in rows]
    slopes = {a: float(np.polyfit(np.log(links), np.log(c), 1)[0]) for a, c in counts.items()}
    slopes_nv = {a: float(np.polyfit(np.log(nv), np.log(c), 1)[0]) for a, c in counts.items()}
    rows.append(["slope vs links", "", "", round(slopes["delassus_apply"], 3), round(slopes["damped_inverse_apply"], 3)])
    rows.append(["slope vs nv", "", "", round(slopes_nv["delassus_apply"], 3), round(slopes_nv["damped_inverse_apply"], 3)])
    rows.append(["per link (50→100)", "", "", (counts["delassus_apply"][-1] - counts["delassus_apply"][-2]) // 50,
                 (counts["damped_inverse_apply"][-1] - counts["damped_inverse_apply"][-2]) // 50])
    write("matrix_free_swimmer", rows, ["links", "nv", "m", "delassus_apply", "damped_inverse_apply"],
          "Swimmer scaling of the matrix-free operators (instructions, cse)")
    return slopes


if __name__ == "__main__":
    main()
