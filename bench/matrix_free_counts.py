"""Operation counts of the matrix-free operators (delassus_apply, damped_inverse_apply) against
the explicit routes (delassus_explicit_apply: the cheapest explicit Λ⁻¹ then a product;
damped_inverse_explicit: that Λ⁻¹ + diag(1/R), LDLᵀ and two solves), whole and for a new
vector (the last stage of codegen/staging.py), all with CasADi's cse.  Also the swimmer scaling
of the matrix-free paper's Fig. 2 (../shared/papers/001_a194bdf892a0cc2c.txt) with the
fitted log-log slopes of instructions against the number of links and against nv, and a plot.
nv = links + 5 (the free base) while the matrix-free counts are c·links minus a constant, so the
nv slope over small n overstates their growth; the per-link increment shows it is linear.  The
explicit routes are traced up to EXPLICIT_LINKS links only: their LDLᵀ is O(m³) nodes
(m = 6 · links), beyond what an SX graph and gcc take in minutes.

    python bench/matrix_free_counts.py     # writes results/matrix_free*.md/.csv, matrix_free_swimmer.png
"""
from __future__ import annotations

from common import RESULTS, slope, write

from casadi_delassus.codegen import staging
from casadi_delassus.opcount import count_ops
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.model import load_robot

SCENARIOS = [("go2", "4F3"), ("g1", "8F3"), ("talos", "2F"), ("swimmer:n=5", "default"),
             ("boxes:n=3", "default")]
MATRIX_FREE = ("delassus_apply", "damped_inverse_apply")
EXPLICIT = ("delassus_explicit_apply", "damped_inverse_explicit")
LINKS = (5, 10, 20, 50, 100)
EXPLICIT_LINKS = (5, 10, 20, 30)


def scenario(spec, sc):
    robot = load_robot(spec)
    return robot, ConstraintSet.parse(robot, robot.scenarios[sc])


def counts(robot, cs, algorithm):
    """(instructions of the whole function, of its last stage: a new vector)."""
    f, _, _ = trace(robot, cs, algorithm)
    last = staging.split(f, staging.algorithm_stages(algorithm, list(f.name_in())))[-1]
    return count_ops(f)["instructions"], count_ops(last.function)["instructions"]


def scenario_table():
    rows = []
    for spec, sc in SCENARIOS:
        robot, cs = scenario(spec, sc)
        row = [f"{spec} {sc}", robot.nv, cs.m]
        for mf, ex in zip(MATRIX_FREE, EXPLICIT):
            (a, a_new), (e, e_new) = counts(robot, cs, mf), counts(robot, cs, ex)
            row += [a, e, round(e / a, 2), a_new, e_new, round(e_new / a_new, 2)]
        rows.append(row)
    heads = ["scenario", "nv", "m"]
    for mf, ex in zip(MATRIX_FREE, EXPLICIT):
        heads += [mf, ex, "explicit/MF", f"{mf} new vector", f"{ex} new vector", "explicit/MF"]
    write("matrix_free", rows, heads, "Matrix-free operators vs the explicit routes (instructions, cse)")


def swimmer_study():
    """{algorithm: {"whole"/"new vector": {links: instructions}}}, nv per links."""
    data, nv = {a: {"whole": {}, "new vector": {}} for a in MATRIX_FREE + EXPLICIT}, {}
    for n in sorted(set(LINKS) | set(EXPLICIT_LINKS)):
        robot, cs = scenario(f"swimmer:n={n}", "default")
        nv[n] = robot.nv
        for a in data:
            if n in (EXPLICIT_LINKS if a in EXPLICIT else LINKS):
                data[a]["whole"][n], data[a]["new vector"][n] = counts(robot, cs, a)
                print(f"swimmer n={n} {a}: {data[a]['whole'][n]:,} (new vector {data[a]['new vector'][n]:,})", flush=True)
    return data, nv


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.8))
    colors = dict(zip(MATRIX_FREE + EXPLICIT, ["tab:blue", "tab:green", "tab:gray", "k"]))
    for a, parts in data.items():
        for part, style in (("whole", "-o"), ("new vector", "--s")):
            x = sorted(parts[part])
            ax.loglog(x, [parts[part][n] for n in x], style, color=colors[a], ms=4,
                      label=f"{a} ({part}, slope {slope(x, [parts[part][n] for n in x]):.2f})")
    ax.set_xlabel("swimmer links (nv = links + 5, m = 6·links)")
    ax.set_ylabel("instructions (cse)")
    ax.set_title("Swimmer scaling (matrix-free paper Fig. 2): matrix-free vs explicit", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main():
    scenario_table()
    data, nv = swimmer_study()
    algos = list(data)
    rows = []
    for n in sorted(nv):
        rows.append([n, nv[n], 6 * n] + [data[a][part].get(n) for a in algos for part in ("whole", "new vector")])
    slopes = {(a, part): (slope(sorted(v), [v[n] for n in sorted(v)]), slope([nv[n] for n in sorted(v)], [v[n] for n in sorted(v)]))
              for a in algos for part, v in data[a].items()}
    rows.append(["slope vs links", "", ""] + [round(slopes[(a, p)][0], 3) for a in algos for p in ("whole", "new vector")])
    rows.append(["slope vs nv", "", ""] + [round(slopes[(a, p)][1], 3) for a in algos for p in ("whole", "new vector")])
    rows.append(["per link (50→100)", "", ""] + [(data[a][p][100] - data[a][p][50]) // 50 if 100 in data[a][p] else ""
                                                for a in algos for p in ("whole", "new vector")])
    write("matrix_free_swimmer", rows, ["links", "nv", "m"] + [f"{a}{'' if p == 'whole' else ' new vector'}"
                                                               for a in algos for p in ("whole", "new vector")],
          f"Swimmer scaling (instructions, cse); explicit routes up to {max(EXPLICIT_LINKS)} links")
    print(f"-> {plot(data, RESULTS / 'matrix_free_swimmer.png')}")
    return slopes


if __name__ == "__main__":
    main()
