"""MJCF models loaded through MuJoCo (model/mjcf.py) against MuJoCo itself
(verify/mujoco_oracle.py): every MuJoCo asset gymnasium ships, dm_control's suite models with
legs (walker, cheetah, humanoid, CMU humanoid, quadruped, dog) and its ball-joint test model,
and the test suite's ball-joint creature (tests/models/mjcf_ball_creature.xml).  Per model, over N random qpos (random joint
values, random unit quaternions) passed as data.qpos and random qvel, τ:

- each Delassus algorithm that accepts the contact frames (traced, evaluated numerically) against
  MuJoCo's J M⁻¹ Jᵀ (mj_fullM with armature, mj_jac rotated into the frames),
- aba against MuJoCo's qacc (mj_forward, constraints, passive forces and actuators disabled),
- pv (hard constraints, random k) against the KKT system of MuJoCo's M, bias, J and J̇v where the
  rows are independent (planar models' 3D/6D rows are not: "redundant"),

as the worst relative error max|ours − MuJoCo| / max|MuJoCo|.

    nice .venv/bin/python bench/mjcf_models.py [--samples 100]

writes bench/results/mjcf_models.md and .csv.
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
from common import ROOT, say, write

from casadi_delassus import load_robot
from casadi_delassus.codegen.trace import trace
from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.registry import ALGORITHMS
from casadi_delassus.verify import mujoco_oracle as mo
from casadi_delassus.verify.check import relative_error

# contact frames per model: feet (bodies, sites), hands, tips; ant's unnamed feet are bodyN
CONTACTS = {
    "ant": ["body4:3d@0.4,0.4,0", "body7:3d@-0.4,0.4,0", "body10:3d@-0.4,-0.4,0", "body13:3d@0.4,-0.4,0"],
    "half_cheetah": ["bfoot:6d", "ffoot:3d"],
    "hopper": ["foot:3d"],
    "humanoid": ["left_foot:6d", "right_foot:6d", "left_lower_arm:3d@0.18,0.18,0.18"],
    "humanoidstandup": ["left_foot:6d", "right_foot:6d"],
    "inverted_double_pendulum": ["tip:3d"],
    "inverted_pendulum": ["pole:3d@0,0,0.6"],
    "point": ["torso:3d"],
    "pusher": ["tips_arm:3d", "object:3d"],
    "pusher_v5": ["tips_arm:3d", "object:3d"],
    "reacher": ["fingertip:3d"],
    "swimmer": ["back:3d", "mid:6d"],
    "walker2d": ["foot:3d", "foot_left:3d@0.1,0,0"],
    "walker2d_v5": ["foot:3d", "foot_left:3d@0.1,0,0"],
    "ball_creature": ["toe:3d", "palm:6d", "eye:3d"],
    # dm_control (installed without its dependencies: its model files only)
    "dm_model_with_ball_joints": ["gripsite:6d"],
    "dm_walker": ["right_foot:3d", "left_foot:3d"],
    "dm_cheetah": ["bfoot:6d", "ffoot:3d"],
    "dm_humanoid": ["left_foot:6d", "right_foot:6d"],
    "dm_humanoid_CMU": ["lfoot:6d", "rfoot:6d"],
    "dm_quadruped": ["toe_front_left:3d", "toe_front_right:3d", "toe_back_left:3d", "toe_back_right:3d"],
    "dm_dog": ["foot_L:3d", "foot_R:3d", "hand_L:3d", "hand_R:3d"],
}

# dm_control's models, by the name used above, relative to its package folder
DM_CONTROL = {"dm_model_with_ball_joints": "mujoco/testing/assets/model_with_ball_joints.xml",
              "dm_walker": "suite/walker.xml", "dm_cheetah": "suite/cheetah.xml", "dm_humanoid": "suite/humanoid.xml",
              "dm_humanoid_CMU": "suite/humanoid_CMU.xml", "dm_quadruped": "suite/quadruped.xml",
              "dm_dog": "suite/dog.xml"}


def models():
    import gymnasium
    assets = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets"
    out = {p.stem: p for p in sorted(assets.glob("*.xml"))}
    out["ball_creature"] = ROOT / "tests" / "models" / "mjcf_ball_creature.xml"
    spec = importlib.util.find_spec("dm_control")
    if spec is None:
        say("dm_control is not installed (make setup installs its model files): its models skipped")
    else:
        out |= {name: Path(spec.origin).parent / rel for name, rel in DM_CONTROL.items()}
    return out


def joints(robot):
    kinds = {}
    for b in robot.bodies:
        kinds[b.joint.kind] = kinds.get(b.joint.kind, 0) + 1
    return " ".join(f"{n} {k}" for k, n in kinds.items())


def measure(path, specs, samples, algorithms):
    robot = load_robot(path)
    cs = ConstraintSet.parse(robot, specs)
    fs = {a: trace(robot, cs, a)[0] for a in algorithms if ALGORITHMS[a].accepts(cs)}
    aba = trace(robot, cs, "aba")[0]
    rng = np.random.default_rng(0)
    # pv only where the rows are independent (a planar model's 3D rows are not)
    eig = np.linalg.eigvalsh(mo.delassus(path, specs, robot.random_q(rng)))
    pv = trace(robot, cs, "pv")[0] if eig.min() > 1e-10 * eig.max() else None
    worst = dict.fromkeys([*fs, "aba", "pv"], 0.0)
    for _ in range(samples):
        q, v, tau, k = robot.random_q(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv), rng.normal(size=cs.m)
        D = mo.delassus(path, specs, q)
        for a, f in fs.items():
            worst[a] = max(worst[a], relative_error(f(q=q)["delassus"], D))
        worst["aba"] = max(worst["aba"], relative_error(aba(q=q, v=v, tau=tau)["vdot"], mo.forward(path, q, v, tau)))
        if pv is not None:
            vdot, _ = mo.constrained(path, specs, q, v, tau, k)
            worst["pv"] = max(worst["pv"], relative_error(pv(q=q, v=v, tau=tau, k=k)["vdot"], vdot))
    if pv is None:
        worst["pv"] = "redundant"
    return robot, cs, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()
    algorithms = [a for a, algo in ALGORITHMS.items() if "delassus" in algo.outputs]
    rows = []
    for name, path in models().items():
        if name not in CONTACTS:
            say(f"{name}: no contact frames chosen, skipped")
            continue
        say(f"{name} ...")
        robot, cs, worst = measure(path, CONTACTS[name], args.samples, algorithms)
        rows.append([name, joints(robot), robot.nq, robot.nv, "yes" if np.any(robot.armature) else "no",
                     " ".join(CONTACTS[name]), cs.m, *[worst.get(a, "n/a") for a in algorithms], worst["aba"],
                     worst["pv"]])
    write("mjcf_models", rows, ["model", "joints", "nq", "nv", "armature", "contact frames", "m", *algorithms,
                                "aba vs qacc", "pv vs KKT"],
          title=f"MJCF models against MuJoCo: worst relative error over {args.samples} random qpos "
                f"(bench/mjcf_models.py)")


if __name__ == "__main__":
    main()
