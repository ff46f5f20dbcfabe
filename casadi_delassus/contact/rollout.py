"""The whole rollout in C (issue 27): ``<name>_rollout`` runs steps of the loop of simulation/simulate.py under a fixed
linear feedback (simulation/feedback.py), and ``<name>_rollout_batch`` N of them on the threads of runtime/pool.h,
which Python calls in parts of PART_WORK environment-steps, and at least PROGRESS_PARTS parts for the progress bar
(progress.py; the warm start carried between parts, so that the parts are one rollout bit for bit).

One build serves every active set: the contact step (step.py, templates/step.c.j2) is generated for all the
candidates, and a step with active set A solves on G[A, A] and g[A].  Since G = J M⁻¹ Jᵀ, the rows and columns of A
of G are J_A M⁻¹ J_Aᵀ, the active set's own Delassus matrix, and g[A] = J_A v_free; the step's ``keep_active``
replaces the other rows and columns by a decoupled block so that their impulses stay exactly 0 and the solver's
iterates on A are those of the solve on G[A, A] (tests/test_rollout.py compares with one compiled step per active set,
which is what simulate.py's per-step loop builds).  Against one step per active set, no set ever needs a build
during a rollout (2^k sets for k candidates), at the cost of the full candidate set's Delassus matrix every step.

Per step, as simulate.py's loop: the candidates' signed distances from their world positions (the SX of
simulate.candidate_positions, generated), the stopping checks (non-finite state, a gap below the fall depth, a torque
not finite or beyond the limit), the active set (gap ≤ margin), the solve warm-started from the previous impulses of
the same contacts (retried from 0 when the warm start fails), and q ⊕ dt v⁺ by the model's integrate (generated).
A step with no active contact is v + dt ABA(q, v, τ) alone, as in the per-step loop.
The C writes step-first arrays and status codes (RawRollouts); simulation/simulate.py and simulate_batch.py make them a Rollout
and a BatchRollout.  Baumgarte's gap term and continuous joints' wrapped angle errors are those of the per-step loop.

Ctrl-C (issue 31): the C runs on a worker thread while the calling thread waits, so that Python's SIGINT handler runs at
once; it sets a flag that every environment reads before each step (``*stop`` in rollout.c.j2), the C returns within a
step, and what was computed comes back, each environment that had not finished with a last step "interrupted".  The
parts make every environment advance alike, and the step-first records mean an interrupted batch touches (and NaN-pads)
the memory of the steps taken, not of the steps asked for."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..version import __version__
from ..codegen.build import BUILT_KINDS, build_cached, host_cpu
from ..runtime.library import entries, open_sealed
from ..codegen.escape import Safe
from ..codegen.trace import trace
from ..constraints import ConstraintSet
from ..errors import InputError
from ..model.integrate import integrate_sx
from ..opcount import count_ops
from ..progress import Bar
from ..registry import AUTO
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from .result import Options
from .step import (DEFAULT_CFLAGS, DEFAULT_OUT, DOUBLE_P, INT_P, STEP_SOLVERS, TEMPLATES, build_key,
                   c_pointer, check_contacts, render, scenario_name, solver_options, step_cflags, step_parts)

FIRST_STOP = 3          # status codes from this one on stop a rollout (rollout.c.j2: nan state, fell, …)
# Environment-steps per call of the batch entry point (a part; about 0.1 s of go1): the records an interrupted batch
# leaves unwritten are at most a part's, and every environment has advanced alike
PART_WORK = 2 ** 16
# Parts a long rollout is cut into at least, so that its progress bar moves, each of MIN_PART_WORK environment-steps
# at least (~6 ms of go1: the call and its threads' start stay negligible)
PROGRESS_PARTS, MIN_PART_WORK = 100, 2 ** 12


def loop_functions(robot, positions, name):
    """(integrate, positions, free): ``<name>_integrate(q, δ)`` → q ⊕ δ, ``<name>_positions(q)`` → the candidates'
    world positions (3k, candidate after candidate) from ``positions`` (casadi.Function q → 3 x k), and
    ``<name>_free(q, v, τ, dt)`` → v + dt ABA(q, v, τ), the step with no active contact (simulate.free_step's ABA)."""
    q, d, v, tau, dt = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("delta", robot.nv), ("v", robot.nv),
                                                      ("tau", robot.nv), ("dt", 1)))
    aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]
    return (ca.Function(f"{name}_integrate", [q, d], [ca.densify(integrate_sx(robot, q, d))], ["q", "delta"], ["q_next"]),
            ca.Function(f"{name}_positions", [q], [ca.densify(ca.reshape(positions(q), -1, 1))], ["q"], ["p"]),
            ca.Function(f"{name}_free", [q, v, tau, dt], [ca.densify(v + dt * aba(q, v, tau))], ["q", "v", "tau", "dt"],
                        ["v_next"]))


def build(robot, cs, positions, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, model=None):
    """Compile the rollout for the contacts ``cs`` and candidate positions ``positions`` (cached by a hash of what
    determines it); returns its manifest's path (sealed: load it with runtime/library.open_sealed)."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    scenario = scenario_name("rollout", cs.specs)
    name = artifact.function_name(model, scenario, "rollout")
    auto = any(f.startswith("auto") for f in cflags)
    q = ca.SX.sym("q", robot.nq)
    key = build_key(robot, cs, cflags, cc, delassus=delassus, host=host_cpu() if auto else None,
                    rollout=str(ca.densify(positions(q))))

    def make():
        # keep_active masks the explicit G: the dense route (the matrix-free factor is that of every candidate)
        prep, post, chosen, factor, solve, _ = step_parts(robot, cs, name, delassus, "dense")
        loop = loop_functions(robot, positions, name)
        flags = step_cflags(cflags, sum(count_ops(f)["instructions"] for f in (prep, post, *loop)), cc) if auto else cflags
        text = TEMPLATES.get_template("rollout.c.j2").render(
            fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__,
            step_code=Safe(render(robot, cs, name, prep, post, chosen, factor, solve, loop)))
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": chosen, "nq": robot.nq,
                    "nv": robot.nv, "m": cs.m, "cflags": list(flags), "version": __version__}
        return text, [*flags, "-pthread"], manifest
    return build_cached(artifact.folder(out_dir, model, scenario), f"rollout_{key[:16]}", make, cc, key, "rollout")


@dataclass(frozen=True)
class RawRollouts:
    """N rollouts as the C writes them, step first: count (N: steps recorded), Q (T+1 x N x nq), V, TAU
    (T x N x nv), GAPS (T x N x k), FORCES (T x N x k x 3), ITS, RES and STATUS (T x N; the codes of
    rollout.c.j2, simulate.py ROLLOUT_STATUSES).  Past an environment's count: states, torques and gaps NaN, forces,
    iterations and residuals 0, status −1; the state row at its count is NaN too when it stopped."""
    count: np.ndarray
    Q: np.ndarray
    V: np.ndarray
    TAU: np.ndarray
    GAPS: np.ndarray
    FORCES: np.ndarray
    ITS: np.ndarray
    RES: np.ndarray
    STATUS: np.ndarray


class CompiledRollout:
    """The compiled rollout of ``robot`` with contact candidates ``specs`` (world-aligned point constraints, the
    friction points, simulate.Scene.specs) at world positions ``positions`` (casadi.Function q → 3 x k: points or
    sphere centres), solved by ``solver`` ("admm", "pgs" or "auto": per active set) to ``tol``."""

    def __init__(self, robot, specs, positions, solver="admm", tol=Options.tol, max_iter=Options.max_iter, out_dir=DEFAULT_OUT,
                 cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, name=None):
        if solver not in STEP_SOLVERS:
            raise InputError(f"unknown contact solver {solver!r} (known: {', '.join(STEP_SOLVERS)})")
        self.robot, self.contacts = robot, check_contacts(robot, specs)
        self.k = self.contacts.m // 3
        self.auto = solver == "auto"
        # the exact (De Saxcé) problem, ADMM's defaults; "auto" picks the solver per active set in C
        self.opts = solver_options(tol, max_iter, "admm" if self.auto else solver, exact=True, fallback=self.auto)
        self.body = np.array([c.body for c in self.contacts.constraints], dtype=np.int32)
        path = build(robot, self.contacts, positions, out_dir, tuple(cflags), cc, delassus, name)
        self.so = path.with_suffix(".so")
        self.manifest, lib, mapped = open_sealed(path, BUILT_KINDS, "rollout")
        # n, first, steps; settings, radii, mu, normals, fb; joint_q, continuous, body; opts; stop; WARM and the
        # records; COUNT; threads
        (self._batch,) = entries(lib, mapped, self.so, self.manifest["function"], [
            ("_rollout_batch", [*[ctypes.c_int] * 3, *[DOUBLE_P] * 5, *[INT_P] * 3, DOUBLE_P, INT_P,
                                *[DOUBLE_P] * 8, INT_P, INT_P, ctypes.c_int])])
        self._lib = lib

    def __call__(self, Q0, V0, steps, dt, feedback, normal, height, radii, mu, margin, tau_limit, fall_depth,
                 normals=None, threads=None, baumgarte=0.0):
        """``steps`` steps from each row of Q0 (N x nq), V0 (N x nv) under ``feedback`` (a LinearFeedback) against the
        ground {x : normal·x ≥ height}; ``normals`` (k x 3) the contact normals the step is given, None for +z;
        ``baumgarte`` β of the gap term (simulate.py); on ``threads`` POSIX threads (None: 1).  The batch entry point
        runs in parts of PART_WORK environment-steps, all environments a part at a time, on a worker thread
        (interruptible): Ctrl-C stops it within a step, and the records end at the last step any environment took."""
        r, k = self.robot, self.k
        N, T = len(Q0), int(steps)
        if (len(feedback.q_ref), len(feedback.joint_q)) != (r.nq, r.nv):
            raise InputError(f"the linear feedback is for nq = {len(feedback.q_ref)}, nv = {len(feedback.joint_q)}; "
                             f"robot {r.name!r} has nq = {r.nq}, nv = {r.nv}")
        settings = np.array([dt, margin, tau_limit, fall_depth, *normal, height, float(self.auto), baumgarte])
        ins = [np.ascontiguousarray(x, dtype=float) for x in (settings, radii, mu)]
        ins.append(None if normals is None else np.ascontiguousarray(normals, dtype=float))
        ins.append(np.ascontiguousarray(feedback.packed()))
        ints = [np.ascontiguousarray(a, dtype=np.int32) for a in (feedback.joint_q, feedback.continuous, self.body)]
        out = RawRollouts(np.zeros(N, dtype=np.int32), *(np.empty(s) for s in ((T + 1, N, r.nq), (T + 1, N, r.nv),
                          (T, N, r.nv), (T, N, k), (T, N, k, 3), (T, N), (T, N))), np.empty((T, N), dtype=np.int32))
        out.Q[0], out.V[0] = Q0, V0
        warm, stop = np.zeros((N, self.contacts.m)), np.zeros(1, dtype=np.int32)
        ptr = c_pointer
        middle = [*map(ptr, ins), *map(ptr, ints), ptr(self.opts), ptr(stop), ptr(warm)]
        records = [*map(ptr, (out.Q, out.V, out.TAU, out.GAPS, out.FORCES, out.ITS, out.RES, out.STATUS)), ptr(out.count)]
        part = max(1, min(PART_WORK // N, max(-(-T // PROGRESS_PARTS), MIN_PART_WORK // N)))
        bar = Bar(T, "steps", heartbeat=True)

        def parts():
            for first in range(0, T, part):
                end = min(first + part, T)
                self._batch(N, first, end - first, *middle, *records, int(threads or 1))
                bar.advance(count=end - first)
                if stop[0] and end < T:         # those the stop found between parts: their step `end` says so
                    self._batch(N, end, 1, *middle, *records, 1)
                if stop[0] or not np.any(out.count == end):         # interrupted, or every environment stopped
                    return
        try:
            interruptible(parts, stop)
        finally:
            bar.close()
        if stop[0]:         # interrupted: the steps no environment reached go (their pages were never touched)
            T = int(out.count.max())
            out = RawRollouts(out.count, *(a[:T + 1] for a in (out.Q, out.V)),
                              *(a[:T] for a in (out.TAU, out.GAPS, out.FORCES, out.ITS, out.RES, out.STATUS)))
        if np.any(out.count < 0):
            raise InputError("the generated rollout failed to evaluate")
        last = out.STATUS[np.maximum(out.count - 1, 0), np.arange(N)]
        stopped = (out.count > 0) & (last >= FIRST_STOP)
        for e in np.flatnonzero(stopped | (out.count < T)):        # what a stopped environment did not write
            c = out.count[e]
            out.Q[c + 1 - stopped[e]:, e], out.V[c + 1 - stopped[e]:, e] = np.nan, np.nan
            out.TAU[c:, e], out.GAPS[c:, e], out.FORCES[c:, e], out.ITS[c:, e], out.RES[c:, e] = np.nan, np.nan, 0, 0, 0
            out.STATUS[c:, e] = -1
        return out


def interruptible(call, stop):
    """call() (a C call that reads ``stop[0]`` between steps) on a worker thread; Ctrl-C in the waiting thread sets
    ``stop[0]``, so the C returns within a step and call() ends with what it computed.  Any other exception (SIGTERM's)
    stops the C the same way and is raised once it has returned; one raised by call() is raised here."""
    failed, done = [], threading.Event()

    def run():
        try:
            call()
        except BaseException as exc:        # noqa: B902  (handed to the waiting thread)
            failed.append(exc)
        finally:
            done.set()
    # waited for by an Event, not Thread.join: a join that Ctrl-C interrupts can mark the thread finished while it runs
    # (CPython 3.11, bpo-45274's fix), and the records would be read while the C still writes them
    threading.Thread(target=run, name="rollout", daemon=True).start()
    try:
        while not done.wait(0.05):      # short waits: the main thread takes its signals between them
            pass
    except KeyboardInterrupt:
        stop[0] = 1
        done.wait()
    except BaseException:
        stop[0] = 1
        done.wait()
        raise
    if failed:
        raise failed[0]
