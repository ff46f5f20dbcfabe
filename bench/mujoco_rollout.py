"""cd.mujoco_rollout against mujoco.rollout.rollout on robosuite-models' Go2 on a floor (issue 32, "done when" 2):
steps/s on one thread and on two, timed interleaved in one run, and the states' agreement.

    taskset -c 0,1 .venv/bin/python bench/mujoco_rollout.py [--envs 16] [--steps 500] [--reps 7] [--model go2] [--lanes 1,auto]
    taskset -c 0 .venv/bin/python bench/mujoco_rollout.py --phases [--model go2]
    .venv/bin/python bench/mujoco_rollout.py --iterations --envs 4 --steps 300 [--model go2]

``--phases``: one thread of the profiling build (-DCD_PROFILE: clock_gettime around each phase of a step) instead,
writing bench/results/mujoco_rollout_phases_<model>.md.  ``--iterations``: Newton line searches a solve, MuJoCo's and
ours, from MuJoCo's own states and warm starts one step at a time (bench/results/mujoco_rollout_iterations_<model>.md).  ``--model``: go2 (the default), or Gymnasium's hopper,
walker2d, humanoid, ant as shipped (RK4).  ``--lanes``: the lane counts of ours timed (1, "auto" or powers of two,
comma-separated; a row each, interleaved with MuJoCo's; a lanes row's states against lanes 1's are in the accuracy rows).

The scene: Go2's robot.xml with a ground plane added as Menagerie's scene.xml adds it, gravity on (the file sets
none), its geoms touching the floor only (conaffinity 0 on the robot: the box-box pairs between its bodies are
refused by the compiled rollout), Euler (the file's default), its elliptic cone and impratio as shipped.  Environments start at qpos0 with the lowest geom point 0-2 cm above
the floor, under sinusoidal controls of half the control ranges.  MuJoCo runs its fastest solver on these
trajectories (PGS, CG or Newton, timed first; Newton for Go2, ant and humanoid, whose file ships PGS) with the
file's other options for the speed; for the accuracy row it runs Newton at 1e-15 (the problem's unique answer).
Writes bench/results/mujoco_rollout.md and .csv."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from common import say, write  # noqa: F401  (puts the repository on sys.path)

import mujoco  # noqa: E402
from mujoco import rollout as mj_rollout  # noqa: E402

import casadi_delassus as cd  # noqa: E402

FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS
REPS_PHASES = 7


def go2_floor():
    """The scene of the module docstring as an MjModel."""
    import importlib.metadata
    path = importlib.metadata.distribution("robosuite-models").locate_file("robosuite_models/assets/robots/go2/robot.xml")
    spec = mujoco.MjSpec.from_file(str(path))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], name="floor")
    for g in spec.geoms:
        if g.name != "floor":
            g.conaffinity = 0
    m = spec.compile()
    m.opt.gravity[:] = [0, 0, -9.81]
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    return m


def scene(name):
    """The bench's MjModel ``name``: go2_floor, or Gymnasium's model as shipped."""
    if name == "go2":
        return go2_floor()
    import importlib.metadata
    path = importlib.metadata.distribution("gymnasium").locate_file(f"gymnasium/envs/mujoco/assets/{name}.xml")
    return mujoco.MjModel.from_xml_path(str(path))


def phases(m, name, x0, u):
    """Seconds per phase of one thread of the profiling build (the repetition of least total: the machine is shared),
    and the unprofiled rollout's least time for the profiling's overhead."""
    from casadi_delassus.codegen.mujoco_rollout import build
    from casadi_delassus.mujoco.rollout import DEFAULT_OUT
    from casadi_delassus.mujoco_model.model import MujocoModel
    from casadi_delassus.mujoco_model.rollout_parts import rollout_parts
    from casadi_delassus.runtime.mujoco_rollout import PROFILE, CompiledRollout
    say("compiling the profiling build ...")
    run = CompiledRollout(build(MujocoModel(m), rollout_parts, DEFAULT_OUT, ("auto", PROFILE)))
    cd.mujoco_rollout(m, mujoco.MjData(m), x0[:1], u[:1, :2])
    state0, control = np.ascontiguousarray(x0), np.ascontiguousarray(u)
    plain, best = [], None
    for _ in range(REPS_PHASES):
        t0 = time.perf_counter()
        cd.mujoco_rollout(m, mujoco.MjData(m), x0, u)
        plain.append(time.perf_counter() - t0)
        run.phases()
        run.run(state0, None, control, u.shape[1], 1, False)
        seconds, counts = run.phases()
        if best is None or sum(seconds.values()) < sum(best[0].values()):
            best = seconds, counts
    seconds, counts = best
    nsteps = u.shape[0] * u.shape[1]
    total = sum(seconds.values())
    rows = [[k, f"{1e6 * v / nsteps:.2f}", f"{100 * v / total:.1f} %"] for k, v in seconds.items()]
    rows.append(["sum of the phases", f"{1e6 * total / nsteps:.2f}", "100 %"])
    rows.append([f"unprofiled step (least of {REPS_PHASES})", f"{1e6 * min(plain) / nsteps:.2f}", ""])
    rows += [[f"{k} per step", f"{v / nsteps:.2f}", ""] for k, v in counts.items()]
    write(f"mujoco_rollout_phases_{name}", rows, ["phase", "µs per step", "share"],
          f"cd.mujoco_rollout's phases, {name}, {u.shape[0]} envs x {u.shape[1]} steps, one thread, profiling build "
          f"(the least total of {REPS_PHASES} repetitions)")


def iterations(m, name, x0, u):
    """Newton line searches a solve, MuJoCo's (solver_niter after mj_step) and ours (the profiling build's count less
    the final evaluation) from the same states and warm starts (MuJoCo's trajectory, its qacc_warmstart), one step
    at a time: how often ours takes as many, one more, ... (Euler models: an RK4 step solves four times, and
    solver_niter counts the last)."""
    from collections import Counter
    from casadi_delassus.codegen.mujoco_rollout import build
    from casadi_delassus.mujoco.rollout import DEFAULT_OUT
    from casadi_delassus.mujoco_model.model import MujocoModel
    from casadi_delassus.mujoco_model.rollout_parts import rollout_parts
    from casadi_delassus.runtime.mujoco_rollout import PROFILE, CompiledRollout
    run = CompiledRollout(build(MujocoModel(m), rollout_parts, DEFAULT_OUT, ("auto", PROFILE)))
    d, state = mujoco.MjData(m), np.zeros(mujoco.mj_stateSize(m, FULL))
    theirs, ours, extra = [], [], Counter()
    run.phases()
    for b in range(len(x0)):
        mujoco.mj_setState(m, d, x0[b], FULL)
        for t in range(u.shape[1]):
            mujoco.mj_getState(m, d, state, FULL)
            warm = d.qacc_warmstart.copy()
            d.ctrl[:] = u[b, t]
            mujoco.mj_step(m, d)
            run.run(np.ascontiguousarray(state[None, :1 + m.nq + m.nv]), warm[None], np.ascontiguousarray(u[b:b + 1, t:t + 1]), 1, 1, False)
            theirs.append(int(d.solver_niter[0]))
            ours.append(int(run.phases()[1]["Newton iterations"]) - 1)
            extra[ours[-1] - theirs[-1]] += 1
    rows = [["mean line searches a solve", f"{np.mean(theirs):.2f}", f"{np.mean(ours):.2f}"]]
    rows += [[f"solves where ours takes {k:+d}", f"{n} of {len(ours)}", f"{100 * n / len(ours):.1f} %"] for k, n in sorted(extra.items())]
    write(f"mujoco_rollout_iterations_{name}", rows, ["", "MuJoCo", "ours"],
          f"Newton line searches a solve from MuJoCo's states and warm starts, {name}, {len(x0)} envs x {u.shape[1]} steps")


def starts(m, n, seed=5):
    """n states at qpos0, the lowest geom point 0-2 cm above the floor (geom_aabb in world z)."""
    d, rng = mujoco.MjData(m), np.random.default_rng(seed)
    mujoco.mj_forward(m, d)
    R = d.geom_xmat.reshape(-1, 3, 3)[:, 2, :]
    low = d.geom_xpos[:, 2] + np.einsum("gk,gk->g", R, m.geom_aabb[:, :3]) - np.einsum("gk,gk->g", np.abs(R), m.geom_aabb[:, 3:])
    out = np.zeros((n, mujoco.mj_stateSize(m, FULL)))
    for b in range(n):
        mujoco.mj_resetData(m, d)
        d.qpos[2] += rng.uniform(0.0, 0.02) - low[m.geom_bodyid > 0].min()
        mujoco.mj_getState(m, d, out[b], FULL)
    return out


def controls(m, n, steps):
    """Sinusoids of half the control ranges."""
    span = np.abs(m.actuator_ctrlrange).max(axis=1)
    t = np.arange(steps)[None, :, None]
    return 0.5 * span * np.sin(0.05 * t + np.arange(m.nu)[None, None, :] + np.arange(n)[:, None, None])


def fastest(m, x0, u, reps=3):
    """A copy of m with MuJoCo's fastest solver on these trajectories (the least CPU time of ``reps`` one-thread
    rollouts each of PGS, CG and Newton), and its name; the model's other options as shipped."""
    best = None
    for name in ("PGS", "CG", "NEWTON"):
        c = m.__copy__()
        c.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{name}")
        seconds = []
        for _ in range(reps):
            t0 = time.process_time()
            mj_rollout.rollout(c, mujoco.MjData(c), x0, u)
            seconds.append(time.process_time() - t0)
        if best is None or min(seconds) < best[0]:
            best = min(seconds), c, name
    return best[1], best[2]


def errors(m, ours, ref):
    """The largest qpos difference and qvel difference relative to max(1, |ref|), printed."""
    q, v = slice(1, 1 + m.nq), slice(1 + m.nq, None)
    dq = np.abs(ours[..., q] - ref[..., q]).max()
    dv = (np.abs(ours[..., v] - ref[..., v]) / np.maximum(1, np.abs(ref[..., v]))).max()
    return f"qpos {dq:.1e}", f"qvel rel {dv:.1e}"


def tight(m):
    """A copy of m with MuJoCo's Newton at 1e-15."""
    c = m.__copy__()
    c.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    c.opt.tolerance, c.opt.iterations, c.opt.ls_iterations = 1e-15, 1000, 200
    return c


def lanes_list(text):
    """--lanes' values: 1, "auto" or integers."""
    return [x if x == "auto" else int(x) for x in text.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--model", default="go2", choices=("go2", "hopper", "walker2d_v5", "humanoid", "ant"))
    ap.add_argument("--phases", action="store_true")
    ap.add_argument("--lanes", type=lanes_list, default=[1], help="lane counts of ours, comma-separated: 1,auto")
    ap.add_argument("--iterations", action="store_true", help="Newton line searches a solve, MuJoCo's and ours, state by state")
    a = ap.parse_args()
    m = scene(a.model)
    x0, u = starts(m, a.envs), controls(m, a.envs, a.steps)
    if a.phases:
        return phases(m, a.model, x0, u)
    if a.iterations:
        return iterations(m, a.model, x0, u)
    say("compiling (first call) ...")
    ours_lanes = {f"casadi_delassus lanes={k}": k for k in a.lanes}
    for lanes in a.lanes:
        cd.mujoco_rollout(m, mujoco.MjData(m), x0[:1], u[:1, :2], lanes=lanes)
    fast, solver = fastest(m, x0, u)          # ours solves the same convex problem whatever m.opt.solver says
    say(f"MuJoCo's fastest solver here: {solver}")
    rows = []
    for nthread in (1, 2):
        data = [mujoco.MjData(m) for _ in range(nthread)]
        calls = [(name, lambda d, lanes=lanes: cd.mujoco_rollout(m, d, x0, u, lanes=lanes)) for name, lanes in ours_lanes.items()]
        calls.append(("mujoco.rollout", lambda d: mj_rollout.rollout(fast, d, x0, u)))
        times = {name: [] for name, _ in calls}
        cpu = {k: [] for k in times}                 # the process's CPU seconds: blind to time the shared machine takes away
        for _ in range(a.reps):                      # interleaved: all see the same machine state
            for name, call in calls:
                t0, c0 = time.perf_counter(), time.process_time()
                call(data)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
        rate = {k: a.envs * a.steps / statistics.median(v) for k, v in times.items()}
        spread = {k: (max(v) - min(v)) / statistics.median(v) for k, v in times.items()}
        for k in times:
            rows.append([nthread, k, round(rate[k]), f"{100 * spread[k]:.1f} %",
                         f"{rate[k] / rate['mujoco.rollout']:.2f}", f"{1e6 * min(cpu[k]) / (a.envs * a.steps):.2f}",
                         f"{min(cpu['mujoco.rollout']) / min(cpu[k]):.2f}"])
    mt = tight(m)
    ref, _ = mj_rollout.rollout(mt, mujoco.MjData(mt), x0, u)
    scalar = None
    for name, lanes in ours_lanes.items():
        ours, _ = cd.mujoco_rollout(mt, mujoco.MjData(mt), x0, u, lanes=lanes)
        scalar = ours if scalar is None else scalar
        rows.append(["accuracy", f"{name} vs Newton 1e-15", *errors(m, ours, ref), "", "", ""])
        if lanes != a.lanes[0]:
            rows.append(["accuracy", f"{name} vs lanes={a.lanes[0]}", *errors(m, ours, scalar), "", "", ""])
    write("mujoco_rollout" + ("" if a.model == "go2" else f"_{a.model}") + ("" if a.lanes == [1] else "_lanes"), rows, ["threads", "rollout", "steps/s (median)", "spread (max-min)/median", "ratio",
                                                                          "CPU µs a step (least)", "CPU ratio"],
          f"cd.mujoco_rollout vs mujoco.rollout ({solver}, MuJoCo's fastest solver here), {a.model}, {a.envs} envs x "
          f"{a.steps} steps, {a.reps} interleaved reps")


if __name__ == "__main__":
    main()
