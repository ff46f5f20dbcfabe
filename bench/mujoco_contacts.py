"""MuJoCo's contact model on the compiled step (casadi_delassus/mujoco_model/soft_step.py) against
MuJoCo 4's own answer: for gymnasium's ant and robosuite-models' Go2 (verify/mujoco_contact_scenes.py:
four feet 1 mm into the ground, standing and sliding at (0.5, 0.2) m/s; "moved": perturbed
joints, a tilted base, random velocities), with the models' own
condim (Go2's feet 6, ant's 3) and others forced on every geom, and stiff contacts (solimp
0.99, 0.9999 on Go2), elliptic and pyramidal cones, the largest relative error of our
efc_force and qacc against MuJoCo's after mj_forward (Newton, tolerance 1e-15), and the ADMM
iterations.

    .venv/bin/python bench/mujoco_contacts.py [--time]

Writes bench/results/mujoco_contacts.md.  ``--time`` (run it under ``taskset -c 0``) adds, for
Go2 standing (its own condim 6), the µs of one raw call of the compiled step (dynamics, rows and
solve, to 1e-12) against MuJoCo's ``mj_fwdConstraint`` alone (its solver on the already computed
rows, Newton at tolerance 1e-15 and at MuJoCo's default 1e-8), interleaved, median and spread.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from common import publish

from casadi_delassus import mujoco_contact_step
from casadi_delassus.mujoco_model.soft_step import mujoco_contacts, soft_parameters
from casadi_delassus.model.mjcf import mujoco_module
from casadi_delassus.verify.mujoco_contact_scenes import scene, state


def relative(a, b):
    """max |a − b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# (robot, condim of every geom: None keeps the model's own, Go2's feet 6 and ant's 3; solimp's (d0, d_width) on
# every geom, None: the model's own)
CASES = [("go2", None, None), ("go2", 4, None), ("go2", 3, None), ("go2", 1, None), ("ant", None, None),
         ("ant", 6, None), ("go2", None, (0.99, 0.9999))]


def case_scene(robot, cone, condim, stiff):
    """The scene of one case (``stiff``: solimp's d0 and d_width on every geom)."""
    m = scene(robot, cone, condim)
    if stiff:
        m.geom_solimp[:, :2] = stiff
    return m


def rows():
    """One row per robot, condim, state and cone: errors of force and qacc, iterations of both solvers."""
    out, steps = [], {}
    for robot, condim, stiff in CASES:
        m = case_scene(robot, "elliptic", condim, stiff)
        specs = mujoco_contacts(m, state(m, robot, "standing")).specs
        key = (robot, tuple(specs))
        if key not in steps:
            steps[key] = mujoco_contact_step(m, specs, cflags=["-O1"])
        for kind in ("standing", "sliding", "moved"):
            for cone in ("elliptic", "pyramidal"):
                m = case_scene(robot, cone, condim, stiff)
                d = state(m, robot, kind)
                r = steps[key].solve(m, d)
                out.append((robot, d.contact[0].dim, "×".join(map(str, stiff or ["model's"])), kind, cone, d.ncon,
                            relative(r.force, d.efc_force), relative(r.qacc, d.qacc), r.iterations, r.status,
                            int(d.solver_niter[0])))
    return out


def timings(reps=31, calls=200):
    """µs per call (median, min–max over ``reps`` interleaved rounds of ``calls`` calls): ours
    and MuJoCo's mj_fwdConstraint at tolerance 1e-15 and 1e-8, on Go2 standing, elliptic."""
    mujoco = mujoco_module()
    m = scene("go2", "elliptic")
    d = state(m, "go2", "standing")
    c = mujoco_contacts(m, d)
    step = mujoco_contact_step(m, c.specs)
    args = (d.qpos.copy(), d.qvel.copy(), d.qfrc_applied.copy(), c.frames, c.friction, c.dims, c.offsets,
            *soft_parameters(m, c, False))

    def ours():
        """One raw call of the compiled step."""
        step(*args)

    def theirs(tolerance):
        """MuJoCo's solver alone at ``tolerance``."""
        def run():
            """One mj_fwdConstraint."""
            m.opt.tolerance = tolerance
            mujoco.mj_fwdConstraint(m, d)
        return run

    runs = {"compiled step (1e-12)": ours, "mj_fwdConstraint (1e-15)": theirs(1e-15),
            "mj_fwdConstraint (1e-8)": theirs(1e-8)}
    times = {k: [] for k in runs}
    for _ in range(reps):
        for k, f in runs.items():
            t = time.perf_counter()
            for _ in range(calls):
                f()
            times[k].append((time.perf_counter() - t) / calls * 1e6)
    base = np.median(times["compiled step (1e-12)"])
    return ["| what | µs per call (median) | min | max | ratio to ours |", "|---|---|---|---|---|"] + [
        f"| {k} | {np.median(v):.2f} | {min(v):.2f} | {max(v):.2f} | {np.median(v) / base:.2f} |" for k, v in times.items()]


def main():
    """Print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", action="store_true", help="also time one call against mj_fwdConstraint")
    timed = parser.parse_args().time
    head = ("| robot | condim | solimp d0×d_width | state | cone | contacts | efc_force rel. error | qacc rel. error "
            "| ADMM iterations | status | MuJoCo Newton iterations |")
    lines = [head, "|" + "---|" * 11]
    lines += ["| " + " | ".join(f"{x:.1e}" if isinstance(x, float) else str(x) for x in row) + " |" for row in rows()]
    if timed:
        lines += ["", "Go2 standing, elliptic, condim 6 (one core):", "", *timings()]
    text = "\n".join(lines)
    publish("mujoco_contacts.md", text + "\n", preface=__doc__.split("\n\n")[0] + "\n\n")


if __name__ == "__main__":
    main()
