"""Frictional contact step (issues 25 and 33): our compiled step (one C call: v_free by ABA, G by the cheapest
Delassus algorithm, g = J v_free, ADMM or PGS to TOL, v_next = v_free + M⁻¹Jᵀλ) against each anchor's fastest
documented route on the same problems (verify/contact_problems.py, timing/a1_problem.py):

- Pinocchio 4.1 from C++ (timing/templates/pinocchio_timing.cpp.j2, contact modes): the whole step as ours computes
  it, aba + g + computeDelassusMatrix + its PGSConstraintSolver, or its ADMMConstraintSolver with each ρ update rule
  (OSQP, its default; SPECTRAL; LINEAR; CONSTANT) and Anderson acceleration (capacities ANDERSON), + v_next by aba with
  the impulses as external forces; built against the pin wheel (its own flags: -O3, no -march=native);
- MuJoCo's mj_forward in C (timing/mujoco_contact.py) on a model with exactly our physics (no joint damping, friction
  loss, limits or mimic equalities), each of its solvers (PGS, CG, Newton) and cones (pyramidal, elliptic), warm
  start off; MuJoCo's contacts are its soft ones;

plus the batched step's throughput on one and two cores.  Used by ``casadi-delassus bench ROBOT --contact`` and
bench/contact.py.  Where the C++ harness cannot be built, Pinocchio's PGS and default ADMM are timed from Python
(``pinocchio_route``: the solve on the problem's G and g, without g and v_next, with the binding cost subtracted).

Each anchor is checked against ours before it is timed: Pinocchio's G and g against the problem's (≤ 1e-12 of
their largest entry) and its v_next against ours (≤ V_TOL); MuJoCo's constraint rows are its contacts' only, and
its v_next lies within MJ_REL of the velocity change our contacts make (its soft contacts yield a few per cent).
A route that fails its check or does not converge in 10,000 iterations is reported, not timed.  Contenders run
pinned to the first allowed CPU, interleaved round by round, timed in CPU time of the calling thread (robust to
other processes on a shared machine); ``markdown`` gives medians with the min–max of the rounds."""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

from ..contact.step import auto_solver, check_contacts
from ..stepping.contact import contact_step
from ..errors import DelassusError
from ..model import load_robot
from ..verify import contact_problems as cp
from . import a1_problem, mujoco_contact
from .pinocchio_harnesses import ADMM_RULES, PinocchioCppHarness, pinocchio_cpp_problem

TOL = 1e-8
CFLAGS = ("auto",)
BATCH_STATES = 20_000
ANDERSON = (0, 5)       # Anderson capacities of Pinocchio's ADMM routes (bench/contact.py --anderson)
V_TOL = 1e3 * TOL       # Pinocchio's v_next against ours: both solves stop at TOL on the impulses
MJ_REL = 0.1            # MuJoCo's soft contacts: its v_next within 10 % of the velocity change ours make


def per_call(fn, calls):
    """CPU seconds of this thread per call of ``fn()`` over ``calls`` calls (thread time: the
    two shared cores of the machine this ran on lose wall time to other processes)."""
    t0 = time.thread_time()
    for _ in range(calls):
        fn()
    return (time.thread_time() - t0) / calls


def ours(p, solver, out):
    """(timer(calls, max_iter) of one step by the batch entry point, the step's StepResult at the problem's state)."""
    s = contact_step(p.robot, p.specs, solver=solver, mu=p.mu, out_dir=out, cflags=CFLAGS)
    r = s(p.q, p.v, p.tau, dt=p.dt, tol=TOL, max_iter=10_000)
    if not r.converged:
        raise DelassusError(f"{p.name}: our {solver} step did not converge ({r.status})")

    def timer(n, max_iter=10_000):
        Q, V, T = (np.tile(x, (n, 1)) for x in (p.q, p.v, p.tau))
        return lambda: _batch_time(s, Q, V, T, p.dt, max_iter)
    return timer, r


def _batch_time(s, Q, V, T, dt, max_iter):
    """Thread CPU seconds per state of one batched call on one thread."""
    t0 = time.thread_time()
    s(Q, V, T, dt=dt, tol=TOL, max_iter=max_iter, threads=1)
    return (time.thread_time() - t0) / len(Q)


def pinocchio_solver(G, mu, solver, admm=("OSQP", 0), tol=TOL):
    """(solver, dense operator of G, constraint models and datas, settings, result) of Pinocchio's ``solver`` ("admm"
    with ``admm`` = (ρ rule, Anderson capacity), or "pgs") on point contacts of friction ``mu``, stopping at absolute
    tolerances ``tol`` (relative 0) within 10,000 iterations: ``solver.solve(operator, g, models, datas, settings,
    result)`` solves."""
    import pinocchio as pin
    models, datas = pin.StdVec_ConstraintModel(), pin.StdVec_ConstraintData()
    for m_i in mu:
        c = pin.PointContactConstraintModel(cp._sample_model(), 0, pin.SE3.Identity(), 1, pin.SE3.Identity())
        c.setFriction(float(m_i))
        models.append(c)
        datas.append(c.createData())
    settings = pin.ADMMSolverSettings() if solver == "admm" else pin.PGSSolverSettings()
    settings.absolute_feasibility_tol = settings.absolute_complementarity_tol = tol
    settings.relative_feasibility_tol = settings.relative_complementarity_tol = 0.0
    settings.max_iterations = 10_000
    if solver == "admm":
        settings.admm_update_rule, settings.anderson_capacity = getattr(pin.ADMMUpdateRule, admm[0]), admm[1]
    result = pin.ADMMSolverResult() if solver == "admm" else pin.PGSSolverResult()
    sol = pin.ADMMConstraintSolver(len(G)) if solver == "admm" else pin.PGSConstraintSolver(len(G))
    return sol, pin.DelassusOperatorDense(np.asarray(G, dtype=float)), models, datas, settings, result


def pinocchio_route(p, solver):
    """(timer of aba + computeDelassusMatrix + solve on the problem's G and g, with the binding cost subtracted; no g and
    no v_next: a lower bound of the C++ route, for where that cannot be built; iterations)."""
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
    sol, op, models, datas, settings, result = pinocchio_solver(p.G, p.mu, solver)
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


def pinocchio_routes(anderson=ANDERSON):
    """Pinocchio's routes: ("pgs", None) and ("admm", (rule, Anderson capacity)) for every rule and capacity."""
    return [("pgs", None)] + [("admm", (rule, a)) for rule in ADMM_RULES for a in anderson]


def route_label(solver, admm):
    """The table's name of a Pinocchio route."""
    if solver == "pgs":
        return "Pinocchio PGS"
    rule, a = admm
    return f"Pinocchio ADMM {rule}" + (f", Anderson {a}" if a else "")


def pinocchio_cpp_route(p, solver, calls, reference, admm=("OSQP", 0), say=lambda s: None):
    """(timer of one C++ round of the whole step in thread CPU seconds per step, iterations), or None with a message
    when the harness cannot be built here, the route does not converge or fails its check: its G and g equal the
    problem's, its v_next ours (``reference``, a StepResult) to V_TOL."""
    from ..errors import CompilerError
    label = route_label(solver, admm)
    problem = pinocchio_cpp_problem()
    if problem:
        say(f"{p.name}: Pinocchio C++ route not measured ({problem}); the Python figure remains")
        return None
    robot = load_robot(p.robot)
    try:
        h = PinocchioCppHarness(robot, check_contacts(robot, p.specs), [dict(q=p.q, v=p.v, tau=p.tau)], calls=calls,
                                mode=f"contact_{solver}", contact=(p.dt, TOL, p.mu, p.G, p.g), progress=say,
                                admm=admm or ("OSQP", 0))
        first = h.run(1)
    except CompilerError as exc:
        say(f"{p.name}: Pinocchio C++ route not measured ({exc}); the Python figure remains")
        return None
    except DelassusError as exc:
        say(f"{p.name}: {label} not timed ({str(exc)[-120:]})")
        return None
    m, nv = len(p.g), len(p.v)
    v_next, dg, dG = first.output[1 + m:1 + m + nv], first.output[-2], first.output[-1]
    err = np.abs(v_next - reference.v_next).max()
    if dg > 1e-12 * np.abs(p.g).max() or dG > 1e-12 * np.abs(p.G).max() or not err <= V_TOL:
        say(f"{p.name}: {label} not timed: its g, G or v_next differ ({dg:.1e}, {dG:.1e}, {err:.1e})")
        return None
    return (lambda: h.run(1).ns[0] * 1e-9), int(first.output[0])


def mujoco_route(p, solver, cone, calls, reference, say=lambda s: None):
    """(timer of mj_forward in C, "iterations (rows)"), or None when MuJoCo's model of ``p`` fails its check: its
    constraint rows are the contacts' only, and its v_next lies within MJ_REL of the velocity change our contacts
    make (‖v_next − ours‖∞ ≤ MJ_REL ‖v_free − ours‖∞)."""
    import pinocchio as pin
    m, d = mujoco_contact.model(p, solver, cone)
    nefc, other = mujoco_contact.rows(m, d)
    v_free = p.v + p.dt * pin.aba(p.model, p.model.createData(), p.q, p.v, p.tau)
    err = np.abs(mujoco_contact.v_next(p, m, d) - reference.v_next).max()
    change = np.abs(v_free - reference.v_next).max()
    if other or d.ncon != len(p.mu) or not err <= MJ_REL * change:
        say(f"{p.name}: MuJoCo {solver} {cone} not timed: {d.ncon} contacts, {other} other rows, v_next off by "
            f"{err:.1e} (the contacts change it by {change:.1e})")
        return None
    h = mujoco_contact.MujocoForwardHarness(m, d, calls)
    return (lambda: h.run(1).ns[0] * 1e-9), f"{int(d.solver_niter[0])} ({nefc} rows)"


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


def measure(problems, reps, calls, out, say=lambda s: None, anderson=ANDERSON):
    """({(problem, contender): [seconds per step, one per round]}, {(problem, contender): iterations}), the contenders'
    rounds interleaved on the first allowed CPU (module docstring).  Ours: "ours admm", "ours pgs" and each with
    ", 0 iterations" (the step without its iterations)."""
    cpus = sorted(os.sched_getaffinity(0))
    contenders, notes = {}, {}
    for p in problems:
        say(f"{p.name}: building the contenders")
        for solver in ("admm", "pgs"):
            timer, r = ours(p, solver, out)
            contenders[p.name, f"ours {solver}"] = timer(calls)
            contenders[p.name, f"ours {solver}, 0 iterations"] = timer(calls, 0)
            notes[p.name, f"ours {solver}"] = r.iterations
        why_not = pinocchio_cpp_problem()
        cpp = why_not is None
        if not cpp:
            say(f"{p.name}: Pinocchio C++ route not measured ({why_not}); the Python figure remains")
        for solver, admm in pinocchio_routes(anderson):
            route = pinocchio_cpp_route(p, solver, calls, r, admm, say) if cpp else None
            if route:
                contenders[p.name, route_label(solver, admm)], notes[p.name, route_label(solver, admm)] = route
            elif not cpp and admm in (None, ("OSQP", 0)):
                t, its = pinocchio_route(p, solver)
                contenders[p.name, f"Pinocchio {solver} Python"] = (lambda t=t: t(calls))
                notes[p.name, f"Pinocchio {solver} Python"] = its
        for solver in mujoco_contact.SOLVERS:
            for cone in mujoco_contact.CONES:
                route = mujoco_route(p, solver, cone, calls, r, say)
                if route:
                    contenders[p.name, f"MuJoCo {solver} {cone}"], notes[p.name, f"MuJoCo {solver} {cone}"] = route
    os.sched_setaffinity(0, {cpus[0]})
    try:
        times = {k: [] for k in contenders}
        for rnd in range(reps):                     # interleaved rounds
            say(f"round {rnd + 1}/{reps}")
            for k, fn in contenders.items():
                times[k].append(fn())
    finally:
        os.sched_setaffinity(0, set(cpus))
    return times, notes


def auto_choice(p):
    """The solver ``solver="auto"`` takes on problem ``p``."""
    robot = load_robot(p.robot)
    return auto_solver(check_contacts(robot, p.specs))


def _fastest(times, name, prefix):
    """(contender, median seconds) of the fastest contender of problem ``name`` whose label starts with ``prefix``."""
    meds = {k[1]: statistics.median(v) for k, v in times.items()
            if k[0] == name and k[1].startswith(prefix) and "0 iterations" not in k[1]}
    return min(meds.items(), key=lambda kv: kv[1]) if meds else (None, None)


def markdown(problems, times, notes, command, reps, batch_rows=(), peak=None, instructions=None):
    """The bench's Markdown: a summary per problem (ours' fastest against each anchor's fastest route), then every
    contender's µs per step, iterations and ratio to ours' fastest, then the batched throughput rows
    (``throughput``'s results).  ``peak`` (scalar add+mul ops/ns) and ``instructions`` ({(problem, solver): SX
    instructions of the step without iterations}) add ours' instructions per ns as a share of that peak."""
    load = os.getloadavg()[0]
    lines = [f"# Contact step against the anchors' fastest routes, µs per step: median (min–max) of {reps} interleaved "
             "rounds", "",
             f"`{command}`; load average {load:.1f} on {os.cpu_count()} CPUs at the end; tolerance {TOL:g}, dt = 1e-3, "
             "thread CPU time, single calls pinned to one CPU.  Ours: -march=native (codegen/build.py's auto flags); "
             "Pinocchio 4.1 C++ against the pin wheel (-O3, the wheel's own build); MuJoCo: the mujoco wheel's "
             "libmujoco.  Pinocchio: aba + g + computeDelassusMatrix + its solver + v_next by aba with the impulses "
             "as external forces (the whole step, as ours); MuJoCo: mj_forward on a model with our physics only (its "
             "soft contacts, warm start off).", "",
             "| problem | ours, fastest | Pinocchio, fastest route | ours faster by | MuJoCo, fastest | ours faster by |",
             "|---|---|---|---|---|---|"]
    for p in problems:
        o, o_t = _fastest(times, p.name, "ours")
        pin_k, pin_t = _fastest(times, p.name, "Pinocchio")
        mj_k, mj_t = _fastest(times, p.name, "MuJoCo")
        cell = lambda k, t: f"{k}: {t * 1e6:.2f} µs, iterations {notes[p.name, k]}" if k else "not measured"  # noqa: E731
        ratio = lambda t: f"**{t / o_t:.1f}×**" if t else ""                                              # noqa: E731
        lines.append(f"| {p.name} | {cell(o, o_t)} | {cell(pin_k, pin_t)} | {ratio(pin_t)} | {cell(mj_k, mj_t)} | "
                     f"{ratio(mj_t)} |")
    lines += ["", "Every contender (ratio: its median over ours' fastest):", "",
              "| problem | contender | µs per step | iterations | ratio to ours' fastest |", "|---|---|---|---|---|"]
    for p in problems:
        _, o_t = _fastest(times, p.name, "ours")
        chosen = auto_choice(p)
        for k in [k for k in times if k[0] == p.name and "0 iterations" not in k[1]]:
            med, extra = statistics.median(times[k]), ""
            if k[1].startswith("ours"):
                solver = k[1].split()[1]
                base = statistics.median(times[p.name, f"ours {solver}, 0 iterations"])
                extra = f"; auto's choice" if solver == chosen else ""
                extra = (f"{(med - base) / max(notes[k], 1) * 1e9:.0f} ns per iteration, the step without iterations "
                         f"{base * 1e6:.2f} µs" + _share(instructions, peak, (p.name, solver), base) + extra)
            lines.append(f"| {p.name} | {k[1]} | {fmt(times[k])} | {notes[k]} | {med / o_t:.2f}{'; ' + extra if extra else ''} |")
    if batch_rows:
        lines += ["", f"Batched steps, {BATCH_STATES:,} states near {problems[0].name}'s stance (joints ±0.01 rad, "
                  f"v ~ N(0, 0.05)), tolerance {TOL:g}, median of {reps} (load average while measuring: "
                  f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):", "",
                  "| solver | threads | steps per µs (wall) | steps per µs of CPU time | median iterations |",
                  "|---|---|---|---|---|"]
        lines += [f"| {s} | {t} | {w:.3f} | {c:.3f} | {i:.0f} |" for s, t, w, c, i in batch_rows]
    return "\n".join(lines) + "\n"


def _share(instructions, peak, key, seconds):
    """", N instr/ns (P % of the scalar peak)" of the step without iterations, or "" without the counts."""
    if not instructions or not peak or key not in instructions:
        return ""
    rate = instructions[key] / (seconds * 1e9)
    return f" ({instructions[key]:,} SX instructions: {rate:.2f} instr/ns, {100 * rate / peak:.0f} % of the scalar peak)"


def batch_rows(problem, out, reps, threads=(1, 2)):
    """(solver, threads, steps per µs wall, per µs CPU, median iterations) of the batched step on ``problem``."""
    return [(s, t, *throughput(problem, s, out, BATCH_STATES, t, reps)) for s in ("admm", "pgs") for t in threads]


def problems_of(robot):
    """The contact problems on ``robot`` (go1: go1_stand, go1_slide; talos: talos_stand; a1: a1_stand)."""
    if robot == "a1":
        return [a1_problem.build()]
    return [cp.build(n) for n in cp.PROBLEMS if n.split("_")[0] == robot]


def all_problems():
    """Issue 25's three problems and issue 33's A1 problem."""
    return [cp.build(n) for n in cp.PROBLEMS] + [a1_problem.build()]
