"""The compiled rollout (codegen/contact_rollout.py) loaded and called: its sealed .so opened once
(library.open_sealed, kind "rollout") and ``<name>_rollout_batch`` called on runtime/pool.h's threads in parts of
PART_WORK environment-steps, and at least PROGRESS_PARTS parts for the progress bar (progress.py; the warm start
carried between parts, so that the parts are one rollout bit for bit).  The C writes step-first arrays and status
codes (RawRollouts); simulation/simulate.py and simulate_batch.py make them a Rollout and a BatchRollout.  A
single-precision build (manifest ``precision``, issue 33) reads and writes float32 throughout: its inputs converted as
runtime/inputs.py converts a float function's, its records float32, its tol and max_iter checked by single_options.

Ctrl-C (issue 31): the C runs on a worker thread while the calling thread waits, so that Python's SIGINT handler runs at
once; it sets a flag that every environment reads before each step (``*stop`` in contact_rollout.c.j2), the C returns
within a step, and what was computed comes back, each environment that had not finished with a last step
"interrupted".  The parts make every environment advance alike, and the step-first records mean an interrupted batch
touches (and NaN-pads) the memory of the steps taken, not of the steps asked for."""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from ..contact.result import STEP_OPTIONS, Options
from ..errors import InputError
from ..progress import Bar
from .artifact import BUILT_KINDS
from .contact_step import c_address, solver_options
from .inputs import real_array, real_dtype, unit_q
from .library import entries, open_sealed

FIRST_STOP = 3          # status codes from this one on stop a rollout (contact_rollout.c.j2: nan state, fell, …)
# Environment-steps per call of the batch entry point (a part; about 0.1 s of go1): the records an interrupted batch
# leaves unwritten are at most a part's, and every environment has advanced alike
PART_WORK = 2 ** 16
# Parts a long rollout is cut into at least, so that its progress bar moves, each of MIN_PART_WORK environment-steps
# at least (~6 ms of go1: the call and its threads' start stay negligible)
PROGRESS_PARTS, MIN_PART_WORK = 100, 2 ** 12
# Single precision (issue 33): the solver's iterations are counted in float (exact up to 2^24); its residuals and
# steps (m/s) are float32 sums of velocities, resolved to one float32 ulp of a unit velocity at best: a tol below
# FLT_EPSILON is refused (go1 standing under PD, velocities ~1e-2 m/s: PGS converges to 1e-7 in at most 13 sweeps, not
# to 1e-8 in 1,000)
SINGLE_MAX_ITER = 2 ** 24
SINGLE_TOL_FLOOR = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class RawRollouts:
    """N rollouts as the C writes them, step first: count (N: steps recorded), Q (T+1 x N x nq), V, TAU
    (T x N x nv), GAPS (T x N x k), FORCES (T x N x k x 3), ITS, RES and STATUS (T x N; the codes of
    contact_rollout.c.j2, simulate.py ROLLOUT_STATUSES).  Past an environment's count: states, torques and gaps NaN, forces,
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


def rollout_options(solver, tol, max_iter, relaxed=False, precision="double"):
    """The C loop's opts[] of a rollout solved by ``solver`` ("admm", "pgs" or "auto") to ``tol``, each value checked
    (solver_options): the exact (De Saxcé) problem, or its convex relaxation when ``relaxed`` (as the step's), ADMM's
    defaults; "auto" picks the solver per active set in C.  In single ``precision`` float32, tol and max_iter
    checked by single_options."""
    opts = solver_options(tol, max_iter, "admm" if solver == "auto" else solver, exact=not relaxed,
                          fallback=solver == "auto")
    return single_options(opts) if precision == "single" else opts


def single_options(opts):
    """opts[] of a single-precision rollout: float32, or an InputError (one line) for a tol below SINGLE_TOL_FLOOR
    (what no float32 solve reaches: it would stop every rollout "not converged" after max_iter iterations) or a
    max_iter above SINGLE_MAX_ITER."""
    tol, max_iter = opts[STEP_OPTIONS.index("tol")], opts[STEP_OPTIONS.index("max_iter")]
    if tol < SINGLE_TOL_FLOOR:
        raise InputError(f"tol {tol:g} is below what a float32 solve reaches ({SINGLE_TOL_FLOOR:g}, "
                         f"precision='single'): use tol >= {SINGLE_TOL_FLOOR:g}, or precision='double'")
    if max_iter > SINGLE_MAX_ITER:
        raise InputError(f"max_iter {int(max_iter)} is above what a float32 count holds exactly ({SINGLE_MAX_ITER}, "
                         "precision='single')")
    return opts.astype(np.float32)


class LoadedRollout:
    """The compiled rollout at the sealed manifest ``path`` (codegen/contact_rollout.py) of ``robot`` with the
    contact candidates ``contacts`` (a ConstraintSet of world-aligned points), solved by ``solver`` ("admm", "pgs" or
    "auto": per active set) to ``tol``, the convex relaxation when ``relaxed`` (stepping/rollout.py CompiledRollout
    builds it)."""

    def __init__(self, path, robot, contacts, solver="admm", tol=Options.tol, max_iter=Options.max_iter, relaxed=False):
        self.robot, self.contacts = robot, contacts
        self.k = self.contacts.m // 3
        self.auto = solver == "auto"
        self.so = path.with_suffix(".so")
        self.manifest, lib, mapped = open_sealed(path, BUILT_KINDS, "rollout")
        # float64, or float32 in single precision: every real the C reads and writes (runtime/inputs.py DTYPES)
        self.dtype = real_dtype(self.manifest)
        self.precision = self.manifest.get("precision", {"type": "double"})
        self.opts = rollout_options(solver, tol, max_iter, relaxed, self.precision["type"])
        self.body = np.array([c.body for c in self.contacts.constraints], dtype=np.int32)
        # n, first, steps; settings, radii, mu, normals, fb; joint_q, continuous, body; opts; stop; WARM and the
        # records; COUNT; threads.  The arrays as bare addresses (c_address: __call__ hands twenty, each of the element
        # type the C reads, made so there and held by its locals until the C returns)
        batch = [*[ctypes.c_int] * 3, *[ctypes.c_void_p] * 20, ctypes.c_int]
        (self._batch,) = entries(lib, mapped, self.so, self.manifest["function"], [("_rollout_batch", batch)])
        # built with lanes (codegen/contact_rollout.py): the lane groups' batch, and their width
        self._lanes_batch, self.lanes = self._batch, 1
        if self.manifest.get("lanes", 1) != 1:
            self._lanes_batch, width = entries(lib, mapped, self.so, self.manifest["function"], [
                ("_rollout_lanes_batch", batch), ("_rollout_lanes", [])])
            width.restype = ctypes.c_int
            self.lanes = int(width())
        self._lib = lib

    def __call__(self, Q0, V0, steps, dt, feedback, normal, height, radii, mu, margin, tau_limit, fall_depth,
                 normals=None, threads=None, baumgarte=0.0, lanes=None):
        """``steps`` steps from each row of Q0 (N x nq), V0 (N x nv) under ``feedback`` (a LinearFeedback) against the
        ground {x : normal·x ≥ height}; ``normals`` (k x 3) the contact normals the step is given, None for +z;
        ``baumgarte`` β of the gap term (simulate.py); on ``threads`` POSIX threads (None: 1); ``lanes`` 1 runs one
        environment per thread even where the build has lane groups (None: the build's, self.lanes environments per
        lane group).  The batch entry point
        runs in parts of PART_WORK environment-steps, all environments a part at a time, on a worker thread
        (interruptible): Ctrl-C stops it within a step, and the records end at the last step any environment took."""
        r, k = self.robot, self.k
        N, T = len(Q0), int(steps)
        if (len(feedback.q_ref), len(feedback.joint_q)) != (r.nq, r.nv):
            raise InputError(f"the linear feedback is for nq = {len(feedback.q_ref)}, nv = {len(feedback.joint_q)}; "
                             f"robot {r.name!r} has nq = {r.nq}, nv = {r.nv}")
        settings = np.array([dt, margin, tau_limit, fall_depth, *normal, height, float(self.auto), baumgarte])
        ins = [self._reals(name, x) for name, x in (("settings", settings), ("radii", radii), ("mu", mu))]
        ins.append(None if normals is None else self._reals("normals", normals))
        ins.append(self._reals("the feedback", feedback.packed()))
        ints = [np.ascontiguousarray(a, dtype=np.int32) for a in (feedback.joint_q, feedback.continuous, self.body)]
        real = self.dtype
        out = RawRollouts(np.zeros(N, dtype=np.int32), *(np.empty(s, dtype=real) for s in ((T + 1, N, r.nq),
                          (T + 1, N, r.nv), (T, N, r.nv), (T, N, k), (T, N, k, 3), (T, N), (T, N))),
                          np.empty((T, N), dtype=np.int32))
        if real == np.float32:         # q0's unit blocks normalised in float32, as runtime/inputs.py does
            Q0 = unit_q(self._reals("Q0", Q0), r.q_layout(), "Q0")
        out.Q[0], out.V[0] = Q0, self._reals("V0", V0)
        warm, stop = np.zeros((N, self.contacts.m), dtype=real), np.zeros(1, dtype=np.int32)
        ptr = c_address
        middle = [*map(ptr, ins), *map(ptr, ints), ptr(self.opts), ptr(stop), ptr(warm)]
        records = [*map(ptr, (out.Q, out.V, out.TAU, out.GAPS, out.FORCES, out.ITS, out.RES, out.STATUS)), ptr(out.count)]
        part = max(1, min(PART_WORK // N, max(-(-T // PROGRESS_PARTS), MIN_PART_WORK // N)))
        bar = Bar(T, "steps", heartbeat=True)
        run = self._batch if lanes == 1 else self._lanes_batch

        def parts():
            for first in range(0, T, part):
                end = min(first + part, T)
                run(N, first, end - first, *middle, *records, int(threads or 1))
                bar.advance(count=end - first)
                if stop[0] and end < T:         # those the stop found between parts: their step `end` says so
                    run(N, end, 1, *middle, *records, 1)
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

    def _reals(self, name, x):
        """``x`` as a contiguous array of the rollout's type; in float32 converted as np.float32(x) rounds
        (runtime/inputs.py), a finite value beyond float32's range (inf now) an InputError naming ``name``."""
        with np.errstate(over="ignore"):        # an overflow to inf is refused below, named
            a = np.ascontiguousarray(real_array(name, x, self.dtype))
        if self.dtype == np.float32 and np.any(np.isinf(a) & np.isfinite(np.asarray(x, dtype=np.float64))):
            raise InputError(f"{name} holds values beyond float32's range (±3.4e38): this rollout computes in single "
                             "precision")
        return a


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
