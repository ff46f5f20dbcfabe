"""MuJoCo's contact model on the compiled step (casadi_delassus/contact/mujoco_step.py) against
MuJoCo 4's own answer: for gymnasium's ant and robosuite-models' Go2 (verify/mujoco_contact_scenes.py:
four feet 1 mm into the ground, standing and sliding at (0.5, 0.2) m/s), with the models' own
condim (Go2's feet 6, ant's 3) and others forced on every geom, elliptic and pyramidal cones, the largest relative error of our efc_force and qacc against MuJoCo's after mj_forward
(Newton, tolerance 1e-15), and the ADMM iterations.

    .venv/bin/python bench/mujoco_contacts.py

Writes bench/results/mujoco_contacts.md.
"""
from __future__ import annotations

import numpy as np
from common import RESULTS

from casadi_delassus.contact.mujoco_step import mujoco_contact_step, mujoco_contacts
from casadi_delassus.verify.mujoco_contact_scenes import scene, state


def relative(a, b):
    """max |a − b| / max |b|."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# (robot, condim of every geom: None keeps the model's own, Go2's feet 6 and ant's 3)
CASES = [("go2", None), ("go2", 4), ("go2", 3), ("go2", 1), ("ant", None), ("ant", 6)]


def rows():
    """One row per robot, condim, state and cone: errors of force and qacc, iterations of both solvers."""
    out, steps = [], {}
    for robot, condim in CASES:
        m = scene(robot, "elliptic", condim)
        specs = mujoco_contacts(m, state(m, robot, False)).specs
        key = (robot, tuple(specs))
        if key not in steps:
            steps[key] = mujoco_contact_step(m, specs, cflags=["-O1"])
        for sliding in (False, True):
            for cone in ("elliptic", "pyramidal"):
                m = scene(robot, cone, condim)
                d = state(m, robot, sliding)
                r = steps[key].solve(m, d)
                out.append((robot, d.contact[0].dim, "sliding" if sliding else "standing", cone, d.ncon,
                            relative(r.force, d.efc_force), relative(r.qacc, d.qacc), r.iterations, r.status,
                            int(d.solver_niter[0])))
    return out


def main():
    """Print and write the table."""
    head = ("| robot | condim | state | cone | contacts | efc_force rel. error | qacc rel. error | ADMM iterations | status "
            "| MuJoCo Newton iterations |")
    lines = [head, "|" + "---|" * 10]
    lines += ["| " + " | ".join(f"{x:.1e}" if isinstance(x, float) else str(x) for x in row) + " |" for row in rows()]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mujoco_contacts.md").write_text(__doc__.split("\n\n")[0] + "\n\n" + text + "\n")


if __name__ == "__main__":
    main()
