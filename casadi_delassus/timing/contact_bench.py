"""Frictional contact step (issue 25): our compiled step (one C call: v_free by ABA, G by the
cheapest Delassus algorithm, ADMM or PGS to TOL, M⁻¹Jᵀλ) against Pinocchio 4.1 (aba +
computeDelassusMatrix + its ADMMConstraintSolver / PGSConstraintSolver on the same G, g, μ and
tolerance: from C++ (timing/templates/pinocchio_timing.cpp.j2, contact modes) where the harness
builds, and from Python with the binding cost of each call subtracted as a cross-check) and MuJoCo (mj_forward: mj_fwdPosition through its PGS,
CG or Newton solver with elliptic cones, warm start off) on issue 25's problems
(verify/contact_problems.py), plus the batched step's throughput on one and two cores.  Used by
``casadi-delassus bench ROBOT --contact`` and bench/contact.py.

Single-call contenders run pinned to the first allowed CPU, interleaved round by round, timed
in CPU time of the calling thread (robust to other processes on a shared machine); ``markdown``
gives medians with the min–max of the rounds.  MuJoCo's contacts are its soft ones (its own
solref/solimp): its times are the cost of its solve on the same robot and points, not the same
answer."""
from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

import numpy as np

from ..contact.step import auto_solver, check_contacts, contact_step
from ..errors import DelassusError
from ..model import load_robot
from ..verify import contact_problems as cp
from .pinocchio_harnesses import PinocchioCppHarness, pinocchio_cpp_problem

TOL = 1e-8
CFLAGS = ("auto",)
BATCH_STATES = 20_000


def per_call(fn, calls):
    """CPU seconds of this thread per call of ``fn()`` over ``calls`` calls (thread time: the
    two shared cores of the machine this ran on lose wall time to other processes)."""
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t0) / calls


def ours(p, solver, out):
    """(timer of one step by the batch entry point, iterations, timer of the step without iterations)."""
    s = contact_step(p.robot, p.specs, solver=solver, mu=p.mu, out_dir=out, cflags=CFLAGS)
    r = s(p.q, p.v, p.tau, dt=p.dt, tol=TOL, max_iter=10_000)
    assert r.converged, (p.name, solver, r.status)

    def timer(n, max_iter=10_000):
        Q, V, T = (np.tile(x, (n, 1)) for x in (p.q, p.v, p.tau))
        return lambda: _batch_time(s, Q, V, T, p.dt, max_iter)
    return timer, r.iterations


def _batch_time(s, Q, V, T, dt, max_iter):
    """Thread CPU seconds per state of one batched call on one thread."""
    t0 = time.thread_time()
    s(Q, V, T, dt=dt, tol=TOL, max_iter=max_iter, threads=1)
    return (time.thread_time() - t0) / len(Q)


def pinocchio_route(p, solver):
    """(timer of aba + computeDelassusMatrix + solve with the binding cost subtracted, iterations)."""
    import pinocchio as pin
    model, data = p.model, p.model.createData()
    contacts = pin.StdVec_RigidConstraintModel()
    for f in p.frames:
        fr = model.frames[f]
        contacts.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, model, fr.parentJoint, fr.placement,
                                                 pin.ReferenceFrame.LOCAL))
    cdatas = pin.StdVec_RigidConstraintData()
    for c in contacts:
        cdatas.append(c.createData())
    models, datas = pin.StdVec_ConstraintModel(), pin.StdVec_ConstraintData()
    for mu in p.mu:
        c = pin.PointContactConstraintModel(cp._sample_model(), 0, pin.SE3.Identity(), 1, pin.SE3.Identity())
        c.setFriction(float(mu))
        models.append(c)
        datas.append(c.createData())
    settings = pin.ADMMSolverSettings() if solver == "admm" else pin.PGSSolverSettings()
    settings.absolute_feasibility_tol = settings.absolute_complementarity_tol = TOL
    settings.relative_feasibility_tol = settings.relative_complementarity_tol = 0.0
    settings.max_iterations = 10_000
    result = pin.ADMMSolverResult() if solver == "admm" else pin.PGSSolverResult()
    sol = pin.ADMMConstraintSolver(len(p.g)) if solver == "admm" else pin.PGSConstraintSolver(len(p.g))
    op = pin.DelassusOperatorDense(p.G)
    sol.solve(op, p.g, models, datas, settings, result)
    empty = pin.Model()
    edata, z = empty.createData(), np.zeros(0)

    def step():
        pin.aba(model, data, p.q, p.v, p.tau)
        pin.computeDelassusMatrix(model, data, p.q, contacts, cdatas, 0.0)
        sol.solve(op, p.g, models, datas, settings, result)

    def binding():          # three bound calls with as many arguments, on a model without joints
        pin.rnea(empty, edata, z, z, z)
        pin.rnea(empty, edata, z, z, z)
        pin.rnea(empty, edata, z, z, z)
    return (lambda n: per_call(step, n) - per_call(binding, n)), int(result.iterations)


def pinocchio_cpp_route(p, solver, calls, say=lambda s: None):
    """(timer of one C++ round: aba + computeDelassusMatrix + its solver on the problem's G and g, in thread CPU
    seconds per step; iterations), or None with a message when the harness cannot be built here.  Checks
    that its λ is the Python binding's (the same solver on the same G, g, μ and tolerance)."""
    from ..errors import CompilerError
    problem = pinocchio_cpp_problem()
    if problem:
        say(f"{p.name}: Pinocchio C++ route not measured ({problem}); the Python figure remains")
        return None
    robot = load_robot(p.robot)
    try:
        h = PinocchioCppHarness(robot, check_contacts(robot, p.specs), [dict(q=p.q, v=p.v, tau=p.tau)], calls=calls,
                                mode=f"contact_{solver}", contact=(p.dt, TOL, p.mu, p.G, p.g), progress=say)
    except CompilerError as exc:
        say(f"{p.name}: Pinocchio C++ route not measured ({exc}); the Python figure remains")
        return None
    first = h.run(1)
    lam = cp.pinocchio_solve(p, solver=solver, tol=TOL)[0]
    if not np.allclose(first.output[1:], lam, rtol=0, atol=1e-12 * max(np.abs(lam).max(), 1e-300)):
        raise DelassusError(f"{p.name}: Pinocchio's {solver} λ from C++ differs from its Python binding's")
    return (lambda: h.run(1).ns[0] * 1e-9), int(first.output[0])


def mujoco_model(p, solver):
    """go1 from its URDF (ROBOTS.md: fused static bodies, no visuals, diagonal dummy root inertia,
    a free joint, a plane, the foot spheres the only colliding geoms, condim 3, friction μ) at
    the problem's state; MuJoCo's ``solver`` with elliptic cones, tolerance 1e-8, no warm start."""
    import mujoco
    urdf = Path(cp._robots_dir() / cp.ROBOTS["go1"][0]).read_text()
    urdf = re.sub(r"<visual>.*?</visual>", "", urdf, flags=re.S)
    urdf = re.sub(r"<collision>(?:(?!</collision>).)*<mesh.*?</collision>", "", urdf, flags=re.S)
    urdf = re.sub(r'(<link name="base">.*?<inertia )[^/]*/>', r'\1ixx="1e-6" ixy="0" ixz="0" iyy="1e-6" iyz="0" izz="1e-6"/>',
                  urdf, count=1, flags=re.S)
    urdf = re.sub(r"(<robot[^>]*>)", r'\1<mujoco><compiler fusestatic="true" discardvisual="true" '
                                     r'balanceinertia="false"/></mujoco>', urdf, count=1)
    spec = mujoco.MjSpec.from_string(urdf)
    spec.worldbody.first_body().add_freejoint()
    for g in spec.geoms:
        foot = g.type == mujoco.mjtGeom.mjGEOM_SPHERE and abs(g.size[0] - 0.02) < 1e-12
        g.contype = g.conaffinity = int(foot)
        g.condim, g.friction = 3, [float(p.mu[0]), 0.005, 0.0001]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], condim=3,
                            friction=[float(p.mu[0]), 0.005, 0.0001])
    m = spec.compile()
    m.opt.timestep, m.opt.cone = p.dt, mujoco.mjtCone.mjCONE_ELLIPTIC
    m.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}")
    m.opt.tolerance, m.opt.iterations = TOL, 10_000
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART
    d = mujoco.MjData(m)
    for j in range(1, p.model.njoints):
        name, jq, jv = p.model.names[j], p.model.joints[j].idx_q, p.model.joints[j].idx_v
        if j == 1:                                   # free joint: position, quaternion w x y z
            d.qpos[:3], d.qpos[3:7] = p.q[:3], [p.q[6], *p.q[3:6]]
            d.qvel[:6], d.qfrc_applied[:6] = p.v[:6], p.tau[:6]
            continue
        mj = m.joint(name)
        d.qpos[mj.qposadr[0]], d.qvel[mj.dofadr[0]], d.qfrc_applied[mj.dofadr[0]] = p.q[jq], p.v[jv], p.tau[jv]
    mujoco.mj_forward(m, d)
    return m, d


def mujoco_route(p, solver):
    """(timer of mj_forward minus the binding cost, iterations, contacts found)."""
    import mujoco
    m, d = mujoco_model(p, solver)
    empty = mujoco.MjModel.from_xml_string("<mujoco/>")
    ed = mujoco.MjData(empty)
    return ((lambda n: per_call(lambda: mujoco.mj_forward(m, d), n) - per_call(lambda: mujoco.mj_forward(empty, ed), n)),
            int(d.solver_niter[0]), int(d.ncon))


def throughput(p, solver, out, n, threads, reps):
    """(steps per µs of wall time, steps per µs of process CPU time, median iterations) of the
    batched step over ``threads`` threads, n states near the stance (median over reps)."""
    s = contact_step(p.robot, p.specs, solver=solver, mu=p.mu, out_dir=out, cflags=CFLAGS)
    rng = np.random.default_rng(0)
    Q = np.tile(p.q, (n, 1))
    Q[:, 7:] += rng.normal(scale=0.01, size=(n, len(p.q) - 7))
    V, T = rng.normal(scale=0.05, size=(n, len(p.v))), np.tile(p.tau, (n, 1))
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        r = s(Q, V, T, dt=p.dt, tol=TOL, max_iter=10_000, threads=threads)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return n / statistics.median(wall) / 1e6, n / statistics.median(cpu) / 1e6, float(np.median(r.iterations))


def fmt(xs):
    """µs: median (min–max)."""
    return f"{statistics.median(xs) * 1e6:.2f} ({min(xs) * 1e6:.2f}–{max(xs) * 1e6:.2f})"


def measure(problems, reps, calls, out, say=lambda s: None):
    """{(problem, contender): [seconds per step, one per round]} and {(problem, contender): iterations}, the
    contenders' rounds interleaved on the first allowed CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    contenders, notes = {}, {}
    for p in problems:
        say(f"{p.name}: building the contenders")
        for solver in ("admm", "pgs"):
            timer, its = ours(p, solver, out)
            contenders[p.name, f"ours {solver}"] = timer(calls)
            contenders[p.name, f"ours {solver}, 0 iterations"] = timer(calls, 0)
            notes[p.name, f"ours {solver}"] = its
            cpp = pinocchio_cpp_route(p, solver, calls, say)
            if cpp:
                contenders[p.name, f"Pinocchio {solver} C++"], notes[p.name, f"Pinocchio {solver} C++"] = cpp
            t, its = pinocchio_route(p, solver)
            contenders[p.name, f"Pinocchio {solver} Python"] = (lambda t=t: t(calls))
            notes[p.name, f"Pinocchio {solver} Python"] = its
        if p.robot == "go1":
            for solver in ("pgs", "cg", "newton"):
                t, its, ncon = mujoco_route(p, solver)
                contenders[p.name, f"MuJoCo {solver}"] = (lambda t=t: t(calls))
                notes[p.name, f"MuJoCo {solver}"] = f"{its} ({ncon} contacts)"
    os.sched_setaffinity(0, {cpus[0]})
    try:
        times = {k: [] for k in contenders}
        for r in range(reps):                       # interleaved rounds
            say(f"round {r + 1}/{reps}")
            for k, fn in contenders.items():
                times[k].append(fn())
    finally:
        os.sched_setaffinity(0, set(cpus))
    return times, notes


def auto_choice(p):
    """The solver ``solver="auto"`` takes on problem ``p``."""
    robot = load_robot(p.robot)
    return auto_solver(check_contacts(robot, p.specs))


def markdown(problems, times, notes, command, reps, batch_rows=()):
    """The bench's Markdown: per problem and contender µs per step, iterations, ns per iteration and ratios; then
    the batched throughput rows (``throughput``'s results with their solver and threads)."""
    lines = [f"# Contact step (issue 25), µs per step: median (min–max) of {reps} interleaved rounds", "",
             f"`{command}`; tolerance {TOL:g}, dt = 1e-3, thread CPU time, single calls pinned to one CPU.  "
             "Pinocchio: aba + computeDelassusMatrix + its solver on the same G, g, μ and tolerance, \"C++\" built "
             "against the pin wheel (thread CPU time), \"Python\" from its bindings with three bindings' cost subtracted; "
             "MuJoCo: mj_forward minus an empty model's (its soft contacts, elliptic cones, no warm start).", "",
             "| problem | contender | µs per step | iterations | ns per iteration | ours faster by |",
             "|---|---|---|---|---|---|"]
    for p in problems:
        base = {s: statistics.median(times[p.name, f"ours {s}"]) for s in ("admm", "pgs")}
        chosen = auto_choice(p)
        for k in [k for k in times if k[0] == p.name and "0 iterations" not in k[1]]:
            med, solver = statistics.median(times[k]), k[1].split()[1]
            per_it = ratio = ""
            if k[1].startswith("ours"):
                base_s = statistics.median(times[p.name, f"ours {solver}, 0 iterations"])
                per_it = f"{(med - base_s) / max(notes[k], 1) * 1e9:.0f} (step without iterations {base_s * 1e6:.2f} µs)"
                ratio = "auto's choice" if solver == chosen else ""
            else:
                same = f"{med / base[solver]:.1f}× vs ours {solver}, " if solver in base else ""
                ratio = f"{same}{med / base[chosen]:.1f}× vs ours auto ({chosen})"
            lines.append(f"| {p.name} | {k[1]} | {fmt(times[k])} | {notes[k]} | {per_it} | {ratio} |")
    if batch_rows:
        lines += ["", f"Batched steps, {BATCH_STATES:,} states near {problems[0].name}'s stance (joints ±0.01 rad, "
                  f"v ~ N(0, 0.05)), tolerance {TOL:g}, median of {reps} (load average while measuring: "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):", "",
                  "| solver | threads | steps per µs (wall) | steps per µs of CPU time | median iterations |",
                  "|---|---|---|---|---|"]
        lines += [f"| {s} | {t} | {w:.3f} | {c:.3f} | {i:.0f} |" for s, t, w, c, i in batch_rows]
    return "\n".join(lines) + "\n"


def batch_rows(problem, out, reps, threads=(1, 2)):
    """(solver, threads, steps per µs wall, per µs CPU, median iterations) of the batched step on ``problem``."""
    return [(s, t, *throughput(problem, s, out, BATCH_STATES, t, reps)) for s in ("admm", "pgs") for t in threads]


def problems_of(robot):
    """Issue 25's problems on ``robot`` (go1: go1_stand, go1_slide; talos: talos_stand)."""
    return [cp.build(n) for n in cp.PROBLEMS if n.split("_")[0] == robot]
