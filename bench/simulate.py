"""Rollouts of the time-stepping loop (casadi_delassus/simulation/simulate.py) on the compiled
contact step: issue 27's "done when" point 1, and a speed comparison with MuJoCo's mj_step.

    .venv/bin/python bench/simulate.py go1        # dropped 5 cm, PD to the standing pose, 4 s
    .venv/bin/python bench/simulate.py go2        # the Go2 MJCF: our loop and MuJoCo, same scene
    .venv/bin/python bench/simulate.py talos --max-iter 20000   # 8 sole corners, PD, 5 s (--solver pgs too)
    taskset -c 0 .venv/bin/python bench/simulate.py speed   # steps/s of go1 standing, our per-step loop vs mj_step
    .venv/bin/python bench/simulate.py batch      # 64 go1 environments: run_batch vs single rollouts (per-step loop)
    taskset -c 0 .venv/bin/python bench/simulate.py rollout-speed --solver pgs [--tol 1e-8] [--clock process]   # C rollout vs mujoco.rollout
    taskset -c 0,1 .venv/bin/python bench/simulate.py rollout-batch-speed --envs 1024 --solver pgs [--tol 1e-8]   # 2 threads
        [--lanes 1,auto]   # issue 33: ours with one environment per thread and with SIMD lane groups, side by side
        [--precision double,single --tol 1.2e-7]   # issue 33: ours in FP64 and FP32 (MuJoCo: FP64 only)
        [--clock process]   # CPU time of the process instead of wall time (a shared core's other jobs not counted)
    .venv/bin/python bench/simulate.py landing    # Baumgarte's β: go1 and a box dropped 5 cm, how deep they stay
    taskset -c 0,1 .venv/bin/python bench/simulate.py active-sets   # go1 4F3 landing on the per-step loop: builds, time

Each writes bench/results/simulate_<name>.png, .csv and a line in simulate.md.

- go1: example-robot-data go1.urdf, the SRDF ``standing`` pose with its feet on z = 0 (issue 25's
  go1_stand, verify/contact_problems.py), lifted 5 cm; contacts at the foot-sphere bottoms;
  μ = 0.8; PD on the joints (kp 100, kd 10) to the standing pose, no feedforward.  At rest means:
  the base position over the last second stays within 1e-6 m of its final value.
- go2: robosuite-models' Go2 MJCF (Menagerie-derived), gravity turned on (the file sets 0), a
  ground plane, only the four foot spheres colliding (as shipped: radius 0.022, condim 6, its
  solimp), joint damping and friction loss set to 0 (our loop has neither), dt 1e-3, stood on
  hip 0 / thigh 0.9 / calf −1.8 rad, dropped 5 cm, the same PD as go1 applied as joint torques
  (qfrc_applied) in both.  MuJoCo runs its default solver (Newton) with the file's elliptic
  cones and impratio; our loop treats each foot as a sphere (friction point: its lowest point)
  and runs the NumPy reference step, as the compiled step takes Pinocchio's q layout only.
- talos: talos_full_v2, SRDF ``half_sitting`` on its eight sole corners (issue 25's
  talos_stand), PD on every joint around the balancing torque of that pose, with gains from each
  joint's inertia with the feet held (``stance_gains``, ω = 20 rad/s) and an activation margin of
  0.2 mm (the pose's soles are rolled 1.7 mrad: with the default 1e-6 m margin only four corners
  touch at first, and these gains diverged in 5 steps).  Tried first: gains from
  the mass-matrix diagonal M_ii (ω = 20: tipped over after 2.5 s, the ankles being nearly as
  light as a foot in the floating-base tree; ω = 100: the controller status after 13 steps), and
  one gain for all joints (kp 1000, kd 20: the controller status after 4 steps, on the grippers).
"""
from __future__ import annotations

import argparse
from pathlib import Path
import statistics
import sys
import time

import numpy as np

from common import RESULTS  # noqa: F401  (puts the repository on sys.path)

import casadi_delassus as cd  # noqa: E402
from casadi_delassus.simulation import simulate as sim  # noqa: E402
from casadi_delassus.simulation.rollout_io import plot, write_csv  # noqa: E402
from casadi_delassus.timing.mujoco_contact import CONES, only_contacts  # noqa: E402
from casadi_delassus.verify import contact_problems, reference  # noqa: E402

GO2_STAND = {"hip": 0.0, "thigh": 0.9, "calf": -1.8}
GO1_FEET = [f"{leg}_foot@-0.0173782,0,-0.0098993" for leg in ("FL", "FR", "RL", "RR")]
GO2_FEET = [f"{leg}_calf@-0.002,0,-0.213/0.022" for leg in ("FR", "FL", "RR", "RL")]
DROP, DT = 0.05, 1e-3
KP, KD = 100.0, 10.0           # joint PD gains of go1 and go2 (N·m/rad, N·m·s/rad)
TALOS_OMEGA = 20.0             # talos: each joint's PD bandwidth (rad/s) on its stance inertia
TALOS_MARGIN = 2e-4            # talos: contact activation margin (m)


def say(msg):
    print(msg, flush=True)


def note(name, line):
    """A line of bench/results/simulate.md, also printed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "simulate.md", "a") as f:
        f.write(f"- {name}: {line}\n")
    say(line)


def record(name, rollout, line):
    """Write the rollout's CSV, figure and a line of simulate.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_csv(rollout, RESULTS / f"simulate_{name}.csv")
    plot(rollout, RESULTS / f"simulate_{name}.png")
    note(name, line)


def base_drift(rollout, last=1.0):
    """max ‖p(t) − p(T)‖ of the free base's position over the last ``last`` seconds."""
    p = rollout.q[:, :3]
    tail = p[-int(round(last / rollout.dt)) - 1:]
    return float(np.linalg.norm(tail - p[-1], axis=1).max())


def per_step(controller):
    """The controller as a plain callable: the loop then calls the compiled step once per step (a LinearFeedback
    would run the whole rollout in C), as the runs speed and batch measure."""
    return lambda t, q, v: controller(t, q, v)


def go1_scene():
    """(go1_stand's problem, go1, the scene of its four foot-sphere bottoms)."""
    robot = cd.load_robot("go1")
    return contact_problems.build("go1_stand"), robot, sim.Scene(robot, GO1_FEET)


def go1(args):
    """go1 dropped 5 cm under PD to the standing pose: comes to rest."""
    p, robot, scene = go1_scene()
    t0 = time.perf_counter()
    r = sim.run(scene, sim.place(scene, p.q, DROP), np.zeros(robot.nv), args.T or 4.0, DT,
                cd.pd_controller(robot, p.q, KP, KD), sim.factory("compiled", args.solver, max_iter=args.max_iter))
    wall = time.perf_counter() - t0
    record("go1", r, f"go1 dropped {DROP} m, PD kp {KP:g} kd {KD:g}, {args.solver}: {len(r.statuses)} steps, {r.status}; "
           f"final base height {r.base_height()[-1]:.6f} m (standing pose {p.q[2]:.6f}); base drift over the last "
           f"second {base_drift(r):.2e} m; most iterations {r.iterations.max()}; wall {wall:.1f} s")
    return r


def go2_spec(mujoco):
    """The Go2 MJCF scene (module docstring) as an MjSpec."""
    import importlib.util
    from pathlib import Path
    path = Path(importlib.util.find_spec("robosuite_models").origin).parent / "assets/robots/go2/robot.xml"
    spec = mujoco.MjSpec.from_file(str(path))
    spec.option.gravity = [0.0, 0.0, -9.81]
    spec.option.timestep = DT
    for g in spec.geoms:
        if g.name not in ("FR", "FL", "RR", "RL"):
            g.contype, g.conaffinity = 0, 0
        else:
            g.friction = [0.8, g.friction[1], g.friction[2]]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=1, conaffinity=1)
    return spec


def go2_setup():
    """(MjModel, our Robot from the same model, Scene, q0 dropped 5 cm, standing q, PD)."""
    import mujoco
    from casadi_delassus.model.mjcf import robot_from_mjmodel
    m = go2_spec(mujoco).compile()
    m.dof_damping[:], m.dof_frictionloss[:] = 0.0, 0.0
    robot = robot_from_mjmodel(m, "go2")
    scene = sim.Scene(robot, GO2_FEET)
    q = m.qpos0.copy()
    for b in robot.bodies:
        part = next((k for k in GO2_STAND if b.name.endswith(f"_{k}")), None)
        if part:
            q[b.q_index] = GO2_STAND[part]
    stand = sim.place(scene, q, 0.0)
    return m, robot, scene, sim.place(scene, q, DROP), stand, cd.pd_controller(robot, stand, KP, KD)


def mujoco_rollout(m, q0, controller, steps):
    """MuJoCo's rollout of the same scene: base heights (steps + 1) and the final qpos."""
    import mujoco
    d = mujoco.MjData(m)
    d.qpos[:] = q0
    h = [d.qpos[2]]
    for k in range(steps):
        d.qfrc_applied[:] = controller(k * DT, d.qpos, d.qvel)
        mujoco.mj_step(m, d)
        h.append(d.qpos[2])
    return np.array(h), d


def go2(args):
    """The Go2 MJCF dropped 5 cm: our loop and MuJoCo (default solver), final base heights."""
    import mujoco
    m, robot, scene, q0, stand, pd = go2_setup()
    T = args.T or 3.0
    # the compiled step takes Pinocchio's q layout only: the MJCF model runs on the NumPy step
    r = sim.run(scene, q0, np.zeros(robot.nv), T, DT, pd, sim.factory("reference", args.solver, max_iter=args.max_iter))
    h_mj, d = mujoco_rollout(m, q0, pd, len(r.statuses))
    h = r.base_height()[-1]
    record("go2", r, f"go2 MJCF dropped {DROP} m, PD kp {KP:g} kd {KD:g}: ours (NumPy reference step, {args.solver}, "
           f"rigid) {r.status}, final base height {h:.6f} m, drift over the last second {base_drift(r):.2e} m; "
           f"MuJoCo {mujoco.mjtSolver(m.opt.solver).name} final base height {h_mj[-1]:.6f} m, drift over the last "
           f"second {np.abs(h_mj[-1001:] - h_mj[-1]).max():.2e} m (height); difference {h - h_mj[-1]:+.6f} m; "
           f"MuJoCo's foot gaps at its final state (our kinematics) {np.array2string(scene.gaps(d.qpos), precision=5)} "
           f"m (the file's foot solimp {m.geom_solimp[m.geom('FR').id][:3]}), ours "
           f"{np.array2string(r.gaps[-1], precision=2)} m")
    # the same MuJoCo scene with MuJoCo's default solimp on the feet (stiffer than the file's)
    feet = [m.geom(n).id for n in ("FR", "FL", "RR", "RL")]
    m.geom_solimp[feet] = (0.9, 0.95, 0.001, 0.5, 2.0)
    h_stiff, d_stiff = mujoco_rollout(m, q0, pd, len(r.statuses))
    note("go2-stiff", f"go2, MuJoCo with its default foot solimp (0.9, 0.95, 0.001): final base height "
         f"{h_stiff[-1]:.6f} m, foot gaps {np.array2string(scene.gaps(d_stiff.qpos), precision=5)} m, drift over the "
         f"last second {np.abs(h_stiff[-1001:] - h_stiff[-1]).max():.2e} m; ours - MuJoCo {h - h_stiff[-1]:+.6f} m")
    np.savetxt(RESULTS / "simulate_go2_mujoco_height.csv", np.column_stack([DT * np.arange(len(h_mj)), h_mj, h_stiff]),
               delimiter=",", header="t,base_height_file_solimp,base_height_default_solimp", comments="")
    return r


def stance_gains(robot, problem):
    """Per-joint PD gains kp = ω² m_i, kd = 2ω m_i on each joint's inertia m_i = 1 / (M_c⁻¹)_ii
    with the feet held (M_c⁻¹ = M⁻¹ − M⁻¹Jᵀ (J M⁻¹ Jᵀ)⁺ J M⁻¹, J the eight sole corners): the
    explicit PD then meets kd dt / m_i = 2ω dt ≪ 2 in stance, where the ankles carry the body."""
    from casadi_delassus.constraints import ConstraintSet
    Minv = np.linalg.inv(reference.mass_matrix(robot, problem.q))
    J = reference.constraint_jacobian(robot, ConstraintSet.parse(robot, problem.specs), problem.q)
    W = Minv @ J.T
    mobility = np.diag(Minv - W @ np.linalg.pinv(J @ W, rcond=1e-10) @ W.T)
    m = 1.0 / mobility[[b.v_index for b in robot.bodies if b.joint.kind in ("revolute", "prismatic")]]
    return TALOS_OMEGA ** 2 * m, 2 * TALOS_OMEGA * m


def talos(args):
    """talos on its eight sole corners under PD posture control: stays up for 5 s."""
    p = contact_problems.build("talos_stand")
    robot = cd.load_robot("talos")
    # the SRDF pose rolls each sole by 1.7 mrad (two corners 0.17 mm up): a 0.2 mm activation
    # margin holds all eight from the start, as the stance gains assume
    scene = sim.Scene(robot, [s.replace(":3d-world", "") for s in p.specs], margin=TALOS_MARGIN)
    pd = cd.pd_controller(robot, p.q, *stance_gains(robot, p), p.tau)
    t0 = time.perf_counter()
    r = sim.run(scene, p.q, np.zeros(robot.nv), args.T or 5.0, DT, pd,
                sim.factory("compiled", args.solver, max_iter=args.max_iter))
    h = r.base_height()
    record("talos", r, f"talos on 8 sole corners, PD kp ω² m_i, kd 2ω m_i on stance inertias (ω {TALOS_OMEGA:g} rad/s) around the "
           f"balancing torque, {args.solver}, max_iter {args.max_iter}: {len(r.statuses)} steps, {r.status}; most "
           f"iterations {r.iterations.max()}; base height {h[0]:.6f} -> {h[-1]:.6f} m (lowest {h.min():.6f}); "
           f"base drift over the last second {base_drift(r):.2e} m; wall {time.perf_counter() - t0:.1f} s")
    return r


def go1_mujoco(solver, pd=False, cone="elliptic"):
    """go1.urdf as a MuJoCo model: meshes dropped, the dummy root's inertia made diagonal (its
    off-diagonal 1e-6 are not positive definite), fixed links fused, a free base, a plane, and
    1 mm spheres at the four contact points (condim 3, μ 0.8, ``cone`` cones), dt 1e-3; with the physics of our
    loop only (timing/mujoco_contact.py only_contacts: go1.urdf's joint damping 0.01 and friction 0.2, 12 more
    constraint rows, and its limits removed).  ``pd``: the joint PD as MuJoCo actuators (force KP ctrl − KP q − KD q̇,
    ctrl the reference), so that mj_step and mujoco.rollout run it in their C loop."""
    import importlib.metadata
    import re
    import mujoco
    from pathlib import Path
    root = Path(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots"))
    txt = (root / "go1_description/urdf/go1.urdf").read_text()
    txt = txt.replace('ixy="1e-6" ixz="1e-6" iyy="1e-6" iyz="1e-6"', 'ixy="0" ixz="0" iyy="1e-6" iyz="0"')
    txt = re.sub(r"<(visual|collision)>.*?</\1>", "", txt, flags=re.S)
    txt = txt.replace('<robot name="go1">', '<robot name="go1"><mujoco><compiler fusestatic="true" '
                      'discardvisual="true" balanceinertia="false"/></mujoco>')
    spec = mujoco.MjSpec.from_string(txt)
    spec.option.timestep, spec.option.solver = DT, solver
    spec.option.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    spec.body("base").add_freejoint()
    for leg in ("FL", "FR", "RL", "RR"):
        spec.body(f"{leg}_foot").add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.001, 0, 0],
                                          pos=[-0.0173782, 0, -0.0098993 + 0.001], condim=3, friction=[0.8, 0, 0])
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1])
    for j in spec.joints if pd else ():
        if j.type == mujoco.mjtJoint.mjJNT_HINGE:
            spec.add_actuator(target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT, gainprm=[KP] + [0] * 9,
                              biastype=mujoco.mjtBias.mjBIAS_AFFINE, biasprm=[0, -KP, -KD] + [0] * 7)
    m = spec.compile()
    only_contacts(m)
    return m


def _mujoco_pd(m, robot, q_ours):
    """The same joint PD on MuJoCo's qpos/qvel (its joint order, matched by name)."""
    import mujoco
    names = [m.joint(j).name for j in range(m.njnt)]
    qi = np.array([m.jnt_qposadr[j] for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE])
    vi = np.array([m.jnt_dofadr[j] for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE])
    ours = {b.joint.name: b.q_index for b in robot.bodies if b.joint.kind == "revolute"}
    ref = np.array([q_ours[ours[n]] for j, n in enumerate(names) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE])

    def controller(t, q, v):
        tau = np.zeros(m.nv)
        tau[vi] = KP * (ref - q[qi]) - KD * v[vi]
        return tau
    return controller, qi, ref


def speed(args):
    """Steps per second of a 1,000-step go1 rollout standing under PD: our loop on the compiled
    step against mj_step on the same robot and contact points with each MuJoCo solver, the same
    Python PD callback in both; interleaved repetitions; run it under taskset -c 0 (one core)."""
    import mujoco
    p, robot, scene = go1_scene()
    pd = per_step(cd.pd_controller(robot, p.q, KP, KD))
    steps = sim.factory("compiled", args.solver, max_iter=args.max_iter)      # keeps the step it builds
    sim.run(scene, p.q, np.zeros(robot.nv), 0.2, DT, pd, steps)             # builds the step first
    solvers = {"PGS": mujoco.mjtSolver.mjSOL_PGS, "CG": mujoco.mjtSolver.mjSOL_CG, "Newton": mujoco.mjtSolver.mjSOL_NEWTON}
    models = {k: go1_mujoco(v) for k, v in solvers.items()}
    mj_pd, qi, ref = _mujoco_pd(models["PGS"], robot, p.q)

    def mj(m):
        d = mujoco.MjData(m)
        d.qpos[:3], d.qpos[3:7], d.qpos[qi] = p.q[:3] + [0, 0, 0.001], [1, 0, 0, 0], ref
        for k in range(1000):
            d.qfrc_applied[:] = mj_pd(k * DT, d.qpos, d.qvel)
            mujoco.mj_step(m, d)
        return d.qpos[2]

    def ours():
        return sim.run(scene, p.q, np.zeros(robot.nv), 1.0, DT, pd, steps).q[-1, 2]
    rates = {"ours": [], **{f"MuJoCo {k}": [] for k in solvers}}
    heights = {}
    for _ in range(args.reps):
        for name, fn in [("ours", ours)] + [(f"MuJoCo {k}", (lambda m=m: mj(m))) for k, m in models.items()]:
            t = time.perf_counter()
            heights[name] = fn()
            rates[name].append(1000 / (time.perf_counter() - t))
    med = statistics.median
    parts = [f"{k} {med(v):.0f} ({min(v):.0f}-{max(v):.0f}; final base height {heights[k]:.5f} m)" for k, v in rates.items()]
    best = max(med(v) for k, v in rates.items() if k != "ours")
    line = (f"speed, go1 standing under PD, 1,000 steps of {DT} s, the same Python PD callback, {args.reps} interleaved "
            f"reps, steps/s median (min-max): {'; '.join(parts)}; ours / fastest MuJoCo {med(rates['ours']) / best:.2f}")
    note("speed", line)


def _mujoco_states(m, robot, q_ours, heights):
    """MuJoCo full-physics states (one per height: the standing pose lifted by it) and the actuators' controls
    (the joint references), for mujoco.rollout."""
    import mujoco
    _, qi, ref = _mujoco_pd(m, robot, q_ours)
    d = mujoco.MjData(m)
    kind = mujoco.mjtState.mjSTATE_FULLPHYSICS
    states = np.zeros((len(heights), mujoco.mj_stateSize(m, kind)))
    for row, h in zip(states, heights):
        d.qpos[:3], d.qpos[3:7], d.qpos[qi] = q_ours[:3] + [0, 0, 0.001 + h], [1, 0, 0, 0], ref
        mujoco.mj_getState(m, d, row, kind)
    names = [m.joint(m.actuator_trnid[a, 0]).name for a in range(m.nu)]
    ours = {b.joint.name: b.q_index for b in robot.bodies if b.joint.kind == "revolute"}
    return states, np.array([q_ours[ours[n]] for n in names])


# --clock: wall time, or the process's CPU time (every thread's; another job on a shared core not counted)
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


def _timed(runs, reps, count, window=0.1, clock=time.perf_counter):
    """Interleaved repetitions of ``runs`` ({name: fn}, each ``count`` steps); per name the rates count / seconds.
    Each sample repeats its run for about ``window`` seconds, so that a short run (ours: milliseconds) and a long one
    meet the same share of a loaded machine's time slices.  ``clock``: wall time, or time.process_time (the process's
    CPU time: what other jobs on a shared core take is not counted; every thread's time is summed)."""
    inner = {}
    for k, fn in runs.items():
        t = clock()
        fn()
        inner[k] = max(1, round(window / (clock() - t)))
    rates = {k: [] for k in runs}
    for _ in range(reps):
        for k, fn in runs.items():
            t = clock()
            for _ in range(inner[k]):
                fn()
            rates[k].append(inner[k] * count / (clock() - t))
    return rates


def _summary(rates, ours):
    """'name median (min-max); …' and ours / the fastest MuJoCo entry."""
    med = statistics.median
    best = max(med(v) for k, v in rates.items() if k.startswith("MuJoCo"))
    return ("; ".join(f"{k} {med(v):,.0f} ({min(v):,.0f}-{max(v):,.0f})" for k, v in rates.items()),
            med(rates[ours]) / best)


MJ_SOLVERS = ("PGS", "CG", "Newton")


def mujoco_rollout_models(robot, q_ours, drops):
    """{"MuJoCo SOLVER CONE": (MjModel with the PD as actuators, states, controls)} for every solver and cone."""
    import mujoco
    out = {}
    for solver in MJ_SOLVERS:
        for cone in CONES:
            m = go1_mujoco(getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}"), pd=True, cone=cone)
            out[f"MuJoCo {solver} {cone}"] = (m, *_mujoco_states(m, robot, q_ours, drops))
    return out


def _mujoco_heights(models, n):
    """Each model's final base height after n steps of mujoco.rollout from its first state."""
    from mujoco import rollout as mj_rollout
    import mujoco
    heights = {}
    for k, (m, states, ctrl) in models.items():
        state = mj_rollout.rollout(m, mujoco.MjData(m), states[:1], ctrl[None, None], nstep=n)[0]
        heights[k] = state[0, -1, 1 + 2]          # FULLPHYSICS: time, then qpos
    return heights


def rollout_speed(args):
    """Issues 27 point 4 and 33, one environment on one core (run under taskset -c 0): steps/s of a 1,000-step go1
    standing rollout under the joint PD, our C rollout (one call) against mujoco.rollout (its C loop, the PD as
    actuators) with each MuJoCo solver and cone, on a MuJoCo model with our physics only; interleaved repetitions."""
    from mujoco import rollout as mj_rollout
    import mujoco
    p, robot, scene = go1_scene()
    pd, v0 = cd.pd_controller(robot, p.q, KP, KD), np.zeros(robot.nv)
    factory = sim.factory("compiled", args.solver, args.tol, args.max_iter)
    ours = sim.run(scene, p.q, v0, 1.0, DT, pd, factory)          # builds the rollout first
    runs = {"ours, C rollout": lambda: sim.run(scene, p.q, v0, 1.0, DT, pd, factory)}
    models = mujoco_rollout_models(robot, p.q, [0.0])
    for k, (m, state, ctrl) in models.items():
        runs[f"{k} rollout"] = (lambda m=m, d=mujoco.MjData(m), state=state, ctrl=ctrl:
                                mj_rollout.rollout(m, d, state, ctrl[None, None], nstep=1000))
    heights = {"ours": ours.q[-1, 2], **_mujoco_heights(models, 1000)}
    text, ratio = _summary(_timed(runs, args.reps, 1000, clock=CLOCKS[args.clock]), "ours, C rollout")
    note("rollout-speed", f"rollout speed, go1 standing under PD (kp {KP:g}, kd {KD:g}), 1,000 steps of {DT} s, one "
         f"environment, {args.reps} interleaved reps, load {_load()}, steps/s of {args.clock} time "
         f"median (min-max): {text}; ours / fastest "
         f"MuJoCo {ratio:.2f}; ours {args.solver} to {args.tol:g}, status {ours.status}, most iterations "
         f"{ours.iterations.max()}; MuJoCo without go1.urdf's joint damping, friction loss and limits; final base "
         f"heights " + ", ".join(f"{k} {h:.5f} m" for k, h in heights.items()))


def _load():
    """'L on N CPUs': the 1-minute load average, to stand beside a timing on a shared machine."""
    import os
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def rollout_batch_speed(args):
    """Issues 27 point 4 and 33, batched: environment-steps/s of N go1 environments dropped from 0-2 cm under the joint
    PD, our C rollout's batch entry point on ``--threads`` threads against mujoco.rollout with as many MjData
    (threads), each MuJoCo solver and cone, MuJoCo with our physics only; interleaved repetitions.  ``--lanes``: ours
    once per lane setting (1: one environment per thread; auto: SIMD lane groups of the CPU's width, issue 33), each
    with its states' largest difference from the first (after the n steps); ``--precision``: ours once per precision
    too (single: float32, its build's stored error against double beside; MuJoCo computes in double only)."""
    from mujoco import rollout as mj_rollout
    import mujoco
    from casadi_delassus.simulation.simulate_batch import run_batch
    p, robot, scene = go1_scene()
    pd = cd.pd_controller(robot, p.q, KP, KD)
    N, n, threads = args.envs, args.steps, args.threads
    drops = np.linspace(0.0, 0.02, N)
    Q0, V0 = np.array([sim.place(scene, p.q, h) for h in drops]), np.zeros((N, robot.nv))
    T = n * DT
    lanes = [w if w == "auto" else int(w) for w in args.lanes.split(",")]
    runs, firsts, errors = {}, {}, []
    for precision in args.precision.split(","):
        factory = sim.factory("compiled", args.solver, args.tol, args.max_iter, precision=precision)
        for w in lanes:         # builds each rollout first
            key = f"{'FP32 ' if precision == 'single' else ''}lanes {w}"
            firsts[key] = run_batch(scene, Q0, V0, T, DT, pd, factory, threads=threads, lanes=w)
            built = factory.rollout(scene, Q0[0], w)
            runs[f"ours, C rollout batch, {threads} threads, {key} ({built.lanes})"] = (
                lambda w=w, factory=factory: run_batch(scene, Q0, V0, T, DT, pd, factory, threads=threads, lanes=w))
            if precision == "single":
                r = built.precision
                growth = ", ".join(f"{r['growth'][h]:.1e}" for h in ("1", "10", "100"))
                errors.append(f"{key}: {r['max_rel_error']:.1e} (q {r['outputs']['q']:.1e}, v {r['outputs']['v']:.1e}; "
                              f"within the first 1, 10, 100 steps {growth})")
    keys = list(firsts)
    first = firsts[keys[0]]
    apart = ", ".join(f"{k}: {np.nanmax(np.abs(firsts[k].q - first.q)):.1e}" for k in keys[1:])
    for k, (m, states, ctrl) in mujoco_rollout_models(robot, p.q, drops).items():
        datas = [mujoco.MjData(m) for _ in range(threads)]
        runs[f"{k} rollout, {threads} threads"] = (lambda m=m, datas=datas, states=states, ctrl=ctrl:
                                                   mj_rollout.rollout(m, datas, states, ctrl[None, None], nstep=n))
    rates = _timed(runs, args.reps, N * n, clock=CLOCKS[args.clock])
    text = _summary(rates, next(iter(runs)))[0]
    ratios = ", ".join(f"{w} {_summary(rates, k)[1]:.2f}" for w, k in zip(keys, runs))
    note("rollout-batch-speed", f"batched rollout speed, {N} go1 environments dropped from 0-2 cm under PD, {n} steps, "
         f"{args.reps} interleaved reps, load {_load()}, environment-steps/s of {args.clock} time median (min-max): "
         f"{text}; ours / fastest "
         f"MuJoCo: {ratios}; ours {args.solver} to {args.tol:g}, statuses "
         f"{sorted({s for b in firsts.values() for s in b.status})}"
         + (f", states' largest difference from {keys[0]} ({apart})" if apart else "")
         + (f"; FP32's stored error against FP64 over 1,000 steps of 4 environments: {'; '.join(errors)}" if errors else "")
         + "; MuJoCo without go1.urdf's joint damping, friction loss and limits; MuJoCo computes in FP64 only")


def batch(args):
    """Environment-steps per second of N go1 environments under PD, dropped from 0 to 2 cm:
    run_batch on 1 and 2 threads against N single rollouts, interleaved repetitions."""
    from casadi_delassus.simulation.simulate_batch import run_batch
    p, robot, scene = go1_scene()
    pd = per_step(cd.pd_controller(robot, p.q, KP, KD))
    N, T = args.envs, 0.2
    # dropped from 0 to 2 cm: perturbed joints diverged in flight under this explicit PD (status
    # "controller diverged"), and a rollout that stops early would inflate the rates
    Q0 = np.array([sim.place(scene, p.q, h) for h in np.linspace(0.0, 0.02, N)])
    V0 = np.zeros((N, robot.nv))
    steps = sim.factory("compiled", args.solver, max_iter=args.max_iter)      # keeps the step it builds
    first = run_batch(scene, Q0, V0, T, DT, pd, steps)                      # builds the step first
    if not all(st in (sim.OK, sim.FREE) for st in first.status):
        raise SystemExit(f"the batch did not run to the end: {sorted(set(first.status))}")
    runs = {"single rollouts": lambda: [sim.run(scene, q, v, T, DT, pd, steps) for q, v in zip(Q0, V0)],
            "run_batch, 1 thread": lambda: run_batch(scene, Q0, V0, T, DT, pd, steps),
            "run_batch, 2 threads": lambda: run_batch(scene, Q0, V0, T, DT, pd, steps, threads=2)}
    rates = {k: [] for k in runs}
    for _ in range(args.reps):
        for k, fn in runs.items():
            t = time.perf_counter()
            fn()
            rates[k].append(N * round(T / DT) / (time.perf_counter() - t))
    med = statistics.median
    note("batch", f"batch, {N} go1 environments under PD dropped from 0-2 cm, {round(T / DT)} steps, {args.reps} interleaved reps, "
         f"environment-steps/s median (min-max): " + "; ".join(
             f"{k} {med(v):.0f} ({min(v):.0f}-{max(v):.0f})" for k, v in rates.items()))


BOX = """<robot name="box"><link name="box"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
<inertia ixx="0.02" iyy="0.03" izz="0.04" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""
BOX_CORNERS = [f"box@{x},{y},-0.05" for x in (0.1, -0.1) for y in (0.08, -0.08)]


def landing(args):
    """go1 (PD kp 100, kd 10, the C rollout) and a 2 kg box (no controller, the per-step loop) dropped 5 cm, for
    Baumgarte's β = 0, 0.05, 0.1 (the default), 0.2: how deep the landing goes (|v| dt), how many steps after the first
    touch the last candidate deeper than 1e-6 m is, how high the lowest candidate rises after touching (a hop: the
    outward velocity β d/dt), and the deepest candidate over the last 0.5 s."""
    p, robot, scene = go1_scene()
    box = cd.load_robot(BOX)
    runs = [("go1", scene, sim.place(scene, p.q, DROP), cd.pd_controller(robot, p.q, KP, KD)),
            ("box", sim.Scene(box, BOX_CORNERS), None, None)]
    factory = sim.factory("compiled", args.solver, max_iter=args.max_iter)
    for name, sc, q0, controller in runs:
        q0 = sim.place(sc, sc.robot.neutral_q(), DROP) if q0 is None else q0
        for beta in (0.0, 0.05, 0.1, 0.2):
            r = sim.run(sc, q0, np.zeros(sc.robot.nv), args.T or 2.0, DT, controller, factory, baumgarte=beta)
            low = r.gaps.min(1)
            touch = int(np.argmax(low <= sc.margin))
            deep = np.flatnonzero(low < -1e-6)
            closed = f"{deep.max() - touch + 1} steps after touching" if len(deep) and deep.max() < len(low) - 1 else "never"
            note(f"landing {name}", f"{name} dropped {DROP} m, β = {beta:g}, {len(r.statuses)} steps, {r.status}: deepest "
                 f"{-low.min():.2e} m, within 1e-6 m {closed}, highest after touching {low[touch:].max():.2e} m, "
                 f"deepest over the last 0.5 s {max(-low[-500:].min(), 0.0):.2e} m, final base height "
                 f"{r.base_height()[-1]:.6f} m")


def active_sets(args):
    """go1 on its four feet (scenario 4F3) dropped 2 cm while sliding (v = (0.3, −0.2, 0) m/s), 300 steps of the
    per-step loop (PD as a plain callable) from a fresh build folder: the active sets met, the contact steps built
    (issue 35 point 3: one step over every candidate, masked per step; it was one build per active set) and the wall
    time with the builds, then again with the step cached."""
    import tempfile
    p, robot = contact_problems.build("go1_stand"), cd.load_robot("go1")
    scene = sim.Scene(robot, list(p.specs))
    q0, v0 = sim.place(scene, p.q, 0.02), np.zeros(robot.nv)
    v0[:2] = (0.3, -0.2)
    pd = per_step(cd.pd_controller(robot, p.q, 60.0, 2.0, p.tau))
    with tempfile.TemporaryDirectory() as out:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            r = cd.simulate(robot, "4F3", q0, v0, 0.3, DT, controller=pd, solver=args.solver, out_dir=out, quiet=True)
            times.append(time.perf_counter() - t)
        built = len(list(Path(out).rglob("contact_*.so")))
    sets = len({tuple(a) for a in r.gaps <= scene.margin})
    note("active-sets", f"go1 4F3 landing, {len(r.statuses)} steps ({r.status}), {sets} active sets met: {built} "
                        f"contact step(s) built, {times[0]:.1f} s with the builds, {times[1]:.2f} s cached")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", choices=["go1", "go2", "talos", "speed", "batch", "rollout-speed",
                                                "rollout-batch-speed", "landing", "active-sets"])
    ap.add_argument("-T", type=float, default=None, help="simulated time (s; default per run)")
    ap.add_argument("--solver", choices=["auto", "admm", "pgs"], default="admm")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--max-iter", type=int, default=1000, help="solver iterations per step")
    ap.add_argument("--tol", type=float, default=1e-10, help="solver tolerance of the rollout-* runs (N·s)")
    ap.add_argument("--envs", type=int, default=64, help="environments of the batch runs")
    ap.add_argument("--steps", type=int, default=200, help="steps of rollout-batch-speed")
    ap.add_argument("--threads", type=int, default=2, help="threads of rollout-batch-speed")
    ap.add_argument("--lanes", default="1", help="rollout-batch-speed: ours per lane setting, comma-separated (1, auto, "
                    "a power of two; issue 33's SIMD lane groups)")
    ap.add_argument("--clock", choices=list(CLOCKS), default="wall", help="rollout-speed, rollout-batch-speed: time "
                    "the runs by wall time or by the process's CPU time (a shared core's other jobs not counted)")
    ap.add_argument("--precision", default="double", help="rollout-batch-speed: ours per precision, comma-separated "
                    "(double, single: FP32, tol >= 1.2e-7; issue 33)")
    args = ap.parse_args(argv)
    for name in args.runs:
        {"go1": go1, "go2": go2, "talos": talos, "speed": speed, "batch": batch, "rollout-speed": rollout_speed,
         "rollout-batch-speed": rollout_batch_speed, "landing": landing, "active-sets": active_sets}[name](args)


if __name__ == "__main__":
    sys.exit(main())
