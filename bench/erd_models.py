"""Every URDF of example-robot-data against Pinocchio (issue 13, done-when 1).

    .venv/bin/python bench/erd_models.py [--samples 20] [--tol 1e-9] [-k NAME ...]

For each ``*.urdf`` under the package's ``robots/`` folder: load it, pick contacts by the rule
below, trace every Delassus algorithm and ``pv`` (the traced casadi.Function evaluated
numerically: nothing is compiled) and compare them with Pinocchio's own parse of the same file
(verify/oracles.py: computeDelassusMatrix, constraintDynamics with k = its zero contact
acceleration) over ``--samples`` random q with the cond-scaled tolerance of verify/check.py
(tol · max(1, κ/1e4)).  A model we refuse is listed with our one-line reason and the smallest
eigenvalue of Pinocchio's M (crba, relative to the largest) at random configurations, so that
the table says whether Pinocchio's M is singular too.  Writes bench/results/erd_models.md.

Contact rule (``contacts``), by frame names (case-insensitive), first match wins:
1. frames named like ``sole`` (humanoid soles): a 6D weld on each, floating base;
2. frames named like ``foot`` or ``contact`` (not imu, sensor or camera frames, nor a mobile
   base's footprint), the lowest of each leg: a 3D point on each, floating base;
3. frames named like ``ankle``, the lowest of each leg: 6D on each of one or two, 3D on each
   of three or more, floating base;
4. otherwise a fixed base (arms, hands, grippers, pendulums, mobile bases): a 6D weld on the
   deepest frame of the tree, the end effector (most joints from the root; ties by name).
   Where fewer than six joints lead there the weld is redundant for a hard solve: ``pv``
   refuses it at generation (its reason is in the table) while the Delassus matrix exists;
5. a model with no moving joint at all floats on a free base with a 3D point at its root's
   origin (a 6D weld would leave v̇ = 0, whose relative error is noise over noise).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from casadi_delassus import DelassusError, load_robot  # noqa: E402
from casadi_delassus.api import constraint_set  # noqa: E402
from casadi_delassus.codegen.trace import TracedFunction  # noqa: E402
from casadi_delassus.registry import delassus_algorithms  # noqa: E402
from casadi_delassus.verify.check import compare  # noqa: E402
from casadi_delassus.verify.oracles import get_oracle  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ALGORITHMS = [*delassus_algorithms(), "pv"]
_NOT_A_FOOT = re.compile(r"imu|sensor|camera|optical|laser|footprint", re.I)


def erd_robots_dir():
    return Path(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots"))


def _depth(robot, frame):
    return len(robot.ancestors(frame.body))


def _lowest(robot, frames):
    """The frames with no other frame of ``frames`` on a body below theirs (one per leg)."""
    def below(a, b):                    # b's body strictly below a's
        return a.body != b.body and a.body in robot.ancestors(b.body)
    return [f for f in frames if not any(below(f, g) for g in frames)]


def _named(robot, pattern):
    rx = re.compile(pattern, re.I)
    return sorted((f for f in robot.frames.values() if rx.search(f.name) and not _NOT_A_FOOT.search(f.name)),
                  key=lambda f: f.name)


def contacts(path):
    """(robot, constraint specs, rule) by the module docstring's rule."""
    floating = load_robot(str(path), floating_base=True)
    soles = _lowest(floating, _named(floating, r"sole"))
    if soles:
        return floating, [f"{f.name}:6d" for f in soles], "soles 6D"
    feet = _lowest(floating, _named(floating, r"foot|contact"))
    if feet:
        return floating, [f"{f.name}:3d" for f in feet], "feet 3D"
    ankles = _lowest(floating, _named(floating, r"ankle"))
    if ankles:
        kind = "6d" if len(ankles) <= 2 else "3d"
        return floating, [f"{f.name}:{kind}" for f in ankles], f"ankles {kind.upper()}"
    try:
        fixed = load_robot(str(path), floating_base=False)
    except DelassusError as exc:
        if "no moving bodies" not in str(exc):
            raise
        return floating, [f"{floating.bodies[0].name}:3d"], "no joints: free body, a point"
    end = max(sorted(fixed.frames.values(), key=lambda f: f.name), key=lambda f: _depth(fixed, f))
    return fixed, [f"{end.name}:6d"], "fixed base, end effector 6D"


def pinocchio_mass_spectrum(path, floating, samples, rng):
    """min over samples of λ_min(M)/λ_max(M) of Pinocchio's own parse, or its load error."""
    import pinocchio as pin
    try:
        model = pin.buildModelFromUrdf(str(path), *([pin.JointModelFreeFlyer()] if floating else []))
    except Exception as exc:  # Pinocchio raises std::invalid_argument and others
        return f"Pinocchio cannot load it either ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
    if model.nv == 0:
        return "Pinocchio: no degrees of freedom"
    data = model.createData()
    worst = np.inf
    for _ in range(samples):
        q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        M = pin.crba(model, data, q)
        eig = np.linalg.eigvalsh(np.triu(M) + np.triu(M, 1).T)
        worst = min(worst, eig.min() / eig.max())
    return f"Pinocchio's M: smallest eigenvalue / largest {worst:.1e} ({'singular too' if worst < 1e-12 else 'positive definite'})"


def check_model(path, samples, tol, rng):
    """One table row (dict)."""
    row = {"model": str(path.relative_to(erd_robots_dir())), "nq": None, "nv": None, "contacts": "",
           "results": {}, "worst": None, "status": "", "reason": ""}
    t0 = time.perf_counter()
    try:
        robot, specs, rule = contacts(path)
    except DelassusError as exc:
        floats = not ("no moving bodies" in str(exc))
        row.update(status="refused", reason=f"{exc} | {pinocchio_mass_spectrum(path, floats, 5, rng)}")
        return row
    cs, _ = constraint_set(robot, specs)
    row.update(nq=robot.nq, nv=robot.nv, contacts=f"{rule}: {', '.join(specs)}")
    session = get_oracle("pinocchio").session(robot, cs)
    worst, failed, notes = 0.0, [], []
    for a in ALGORITHMS:
        try:
            f = TracedFunction(robot, cs, a)
        except DelassusError as exc:
            row["results"][a] = "refused"
            notes.append(f"{a} refused: {str(exc)[:90]}")
            continue
        res = compare(f, robot, cs, samples=samples, tol=tol, oracle=session)
        if not res:
            row["results"][a] = "n/a"
            notes.append(f"{a}: " + "; ".join(f"{k} n/a ({v[:70]})" for k, v in res.not_applicable.items()))
            continue
        err = max(c.error for c in res.values())
        worst = max(worst, err)
        notes += [f"{a}: {k} skipped at {n} of {samples} samples ({why[:70]})" for k, (n, why) in res.skipped.items()]
        notes += [f"{a}: {k} n/a ({why[:70]})" for k, why in res.not_applicable.items()
                  if not why.startswith("no counterpart")]          # pv_osim_fast's factors: Λ is compared
        row["results"][a] = f"{err:.1e}" if res.passed else f"FAIL {err:.1e}"
        if not res.passed:
            failed.append(a)
    row.update(worst=worst, status="FAIL" if failed else "agrees", reason="; ".join(notes))
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def write(rows, samples, tol, seconds):
    RESULTS.mkdir(parents=True, exist_ok=True)
    agree = [r for r in rows if r["status"] == "agrees"]
    refused = [r for r in rows if r["status"] == "refused"]
    failed = [r for r in rows if r["status"] == "FAIL"]
    head = ["model", "nq", "nv", "contacts", *ALGORITHMS, "worst rel. error", "result", "reason / notes"]
    lines = ["# example-robot-data URDFs against Pinocchio", "",
             f"`.venv/bin/python bench/erd_models.py --samples {samples} --tol {tol:g}`: every `*.urdf` under "
             f"example-robot-data's `robots/` ({len(rows)} files), contacts by the rule in the script's docstring, "
             f"every Delassus algorithm and `pv` traced (not compiled) and compared with Pinocchio's own parse "
             f"(computeDelassusMatrix; constraintDynamics with k its zero contact acceleration) over {samples} "
             f"random q, tolerance {tol:g}·max(1, κ/1e4).  {len(agree)} load and agree, {len(failed)} disagree, "
             f"{len(refused)} are refused; {seconds:.0f} s in all.", "",
             "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [r["model"], r["nq"] or "", r["nv"] or "", r["contacts"],
                 *(r["results"].get(a, "") for a in ALGORITHMS),
                 "" if r["worst"] is None else f"{r['worst']:.1e}", r["status"], r["reason"].replace("|", "/")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    out = RESULTS / "erd_models.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"{len(agree)} agree, {len(failed)} disagree, {len(refused)} refused; {seconds:.0f} s -> {out}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("-k", "--only", action="append", default=[], help="only models whose path contains this")
    args = ap.parse_args(argv)
    paths = sorted(erd_robots_dir().rglob("*.urdf"))
    if args.only:
        paths = [p for p in paths if any(k in str(p) for k in args.only)]
    rng = np.random.default_rng(0)
    rows, t0 = [], time.perf_counter()
    for k, p in enumerate(paths, 1):
        row = check_model(p, args.samples, args.tol, rng)
        rows.append(row)
        worst = "" if row["worst"] is None else f"{row['worst']:.1e}"
        print(f"[{k}/{len(paths)} {time.perf_counter() - t0:.0f} s] {row['model']}: {row['status']} {worst} "
              f"{row['reason'][:160]}", file=sys.stderr, flush=True)
    write(rows, args.samples, args.tol, time.perf_counter() - t0)
    return 0 if not any(r["status"] == "FAIL" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
