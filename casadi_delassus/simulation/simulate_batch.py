"""N environments stepped together: the loop of simulate.py over a batch, the RL use.

Each time step (simulate.py's scheme, per environment): the controller is called once on the
whole batch (τ = controller(t, Q, V), N x nv), the stopping checks run per environment, the
live environments with an active contact go through the step's batch entry point in one call, each with its own
active-set mask (the compiled step's ``<name>_step_active_batch`` on POSIX threads, one call per solver where
solver "auto" picks both; the NumPy step one environment after another), those without one through the
contact-free step, and q ⊕ dt v⁺ with the new gaps is one mapped SX call.  An environment that stops keeps its status and stays frozen; the others go on.
Results equal N single rollouts (tests/simulation/test_simulate.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..progress import counted
from ..runtime.batch import check_threads
from .simulate import (BAUMGARTE, COLD, CONTROLLER, FALL_DEPTH, FELL, FREE, NAN_STATE, NOT_CONVERGED, OK, ROLLOUT_STATUSES,
                       LinearFeedback, Trajectory, c_rollouts, candidate_step, check_settings, compiled_steps, free_step,
                       gap_term, measured_on, numbers, per_step_precision, record_bytes, step_count, unit_q0)

STOPPED = ""          # the status of an environment after the step that stopped it


@dataclass
class BatchRollout(Trajectory):
    """N trajectories, batch second: q (n+1 x N x nq), v (n+1 x N x nv), τ (n x N x nv), gaps
    (n x N x k), forces (n x N x k x 3), iterations and residuals (n x N), statuses (n x N
    strings; "" after an environment stopped; NaN states there too)."""

    @property
    def status(self):
        """Each environment's last status (N,)."""
        out = []
        for col in self.statuses.T:
            seen = [s for s in col if s != STOPPED]
            out.append(seen[-1] if seen else OK)
        return out


def _one_by_one(step, Q, V, TAU, dt, LAM0, threads=1, GAP=None, ACTIVE=None):
    """A step without a batch entry point, called per environment."""
    gaps, masks = ([None] * len(Q) if x is None else x for x in (GAP, ACTIVE))
    rs = [step(q, v, tau, dt, lam0=lam, gap=gap, active=a) for q, v, tau, lam, gap, a in zip(Q, V, TAU, LAM0, gaps, masks)]
    return (np.array([r.v_next for r in rs]), np.array([r.lam for r in rs]), np.array([r.iterations for r in rs]),
            np.array([r.residual for r in rs]), [r.status for r in rs])


def _stops(Q, V, G, TAU, tau_limit):
    """Per environment: the stopping status before its step, or None."""
    bad_state = ~(np.isfinite(Q).all(1) & np.isfinite(V).all(1))
    fell = (G < FALL_DEPTH).any(1)
    with np.errstate(invalid="ignore"):
        bad_tau = ~np.isfinite(TAU).all(1) | (np.nan_to_num(np.abs(TAU), nan=np.inf).max(1, initial=0.0) > tau_limit)
    return np.where(bad_state, NAN_STATE, np.where(fell, FELL, np.where(bad_tau, CONTROLLER, None)))


def _inputs(scene, Q0, V0, T, dt, threads):
    robot = scene.robot
    Q0, V0 = numbers("Q0", Q0), numbers("V0", V0)
    if Q0.ndim != 2 or Q0.shape[1] != robot.nq or V0.shape != (len(Q0), robot.nv) or len(Q0) == 0:
        raise InputError(f"Q0 must be N x {robot.nq} and V0 N x {robot.nv} with N ≥ 1; got {Q0.shape} and {V0.shape}")
    check_threads(threads)            # the runtime's rule (runtime/batch.py): None or an integer ≥ 1, no bool
    threads = None if threads is None else min(int(threads), len(Q0))      # more threads than environments run idle
    return unit_q0(robot, Q0), V0, step_count(T, dt, record_bytes(scene), len(Q0)), threads


class _Batch:
    """Preallocated arrays of a batch rollout."""

    def __init__(self, scene, Q0, V0, n):
        N, k, r = len(Q0), len(scene.candidates), scene.robot
        self.q, self.v = np.full((n + 1, N, r.nq), np.nan), np.full((n + 1, N, r.nv), np.nan)
        self.q[0], self.v[0] = Q0, V0
        self.tau, self.gaps = np.full((n, N, r.nv), np.nan), np.full((n, N, k), np.nan)
        self.forces = np.zeros((n, N, k, 3))
        self.iterations, self.residuals = np.zeros((n, N), dtype=int), np.zeros((n, N))
        self.statuses = np.full((n, N), STOPPED, dtype=object)


def _from_raw(scene, dt, raw):
    """RawRollouts (runtime/contact_rollout.py, step first as a BatchRollout) as a BatchRollout."""
    names = np.array([*ROLLOUT_STATUSES, STOPPED], dtype=object)[raw.STATUS]      # -1: stopped
    return BatchRollout(scene, dt, raw.Q, raw.V, raw.TAU, raw.GAPS, raw.FORCES, raw.ITS.astype(int), raw.RES, names)


def run_batch(scene, Q0, V0, T, dt, controller=None, step_factory=None, tau_limit=1e6, threads=1,
              baumgarte=BAUMGARTE, lanes=1):
    """Roll N environments of ``scene`` out from (Q0, V0) (N x nq, N x nv) for T seconds of steps
    dt under ``controller(t, Q, V) -> N x nv``, Baumgarte's β = ``baumgarte``; returns a BatchRollout.  A
    LinearFeedback on the compiled step runs all of it in C (contact/rollout.py's batch entry point on ``threads``
    threads; None: the single entry point, environment after environment), ``lanes`` environments per SIMD lane group
    (issue 33: 1, "auto" the CPU's vector width, or a power of two; codegen/contact_rollout.py); a factory with
    precision="single" runs it in float32 (that C rollout only), its build measured on this call's first
    environments (simulate.py measured_on)."""
    robot = scene.robot
    Q, V, n, threads = _inputs(scene, Q0, V0, T, dt, threads)
    baumgarte, tau_limit = check_settings(baumgarte, tau_limit)
    factory = step_factory or compiled_steps()
    if isinstance(controller, LinearFeedback) and hasattr(factory, "rollout"):
        built = factory.rollout(scene, Q[0], lanes, measured_on(scene, Q, V, dt, controller, tau_limit, baumgarte))
        return _from_raw(scene, dt, c_rollouts(scene, built, Q, V, n, dt, controller, tau_limit, threads, baumgarte))
    per_step_precision(factory)
    if lanes != 1:
        raise InputError(f"lanes={lanes!r} runs the C rollout only: give a LinearFeedback (cd.pd_controller) on the "
                         "compiled step")
    threads = threads or 1
    steps = (free_step(robot), candidate_step(scene, factory, Q[0]))
    out, alive = _Batch(scene, Q, V, n), np.ones(len(Q), dtype=bool)
    G, warm = scene.advance(Q, np.zeros_like(V))[1], np.zeros((len(Q), len(scene.candidates), 3))
    for k in counted(n, "steps"):
        idx = np.flatnonzero(alive)
        if not len(idx):
            break
        TAU = np.zeros((len(idx), robot.nv)) if controller is None else \
            np.asarray(controller(k * dt, Q[idx], V[idx]), dtype=float).reshape(len(idx), robot.nv)
        out.tau[k, idx], out.gaps[k, idx] = TAU, G[idx]
        stop = _stops(Q[idx], V[idx], G[idx], TAU, tau_limit)
        out.statuses[k, idx[stop != None]] = stop[stop != None]          # noqa: E711  (object array)
        go, TAU = idx[stop == None], TAU[stop == None]                   # noqa: E711
        touching = (G[go] <= scene.margin).any(1)
        for part, step in zip((~touching, touching), steps):     # the free step; the step masked by each active set
            if part.any():
                _step_group(scene, step, out, k, go[part], Q, V, TAU[part], dt, G, warm, threads, baumgarte)
        moved = go[np.isin(out.statuses[k, go], (OK, FREE, COLD))]
        alive[idx] = np.isin(out.statuses[k, idx], (OK, FREE, COLD))
        if len(moved):
            Q[moved], G[moved] = scene.advance(Q[moved], dt * V[moved])
        out.q[k + 1, moved], out.v[k + 1, moved] = Q[moved], V[moved]
    return BatchRollout(scene, dt, out.q, out.v, out.tau, out.gaps, out.forces, out.iterations, out.residuals,
                        out.statuses)


def _step_group(scene, step, out, k, rows, Q, V, TAU, dt, G, warm, threads, baumgarte):
    """Step ``k`` of the environments ``rows`` (torques TAU) through ``step`` in one batch call, each masked by its
    active set (gaps G ≤ margin), retried cold where a warm start failed; their records, warm starts and V updated."""
    active = G[rows] <= scene.margin
    call = getattr(step, "batch", None) or (lambda *a, s=step, **kw: _one_by_one(s, *a, **kw))
    args = (Q[rows], V[rows], TAU, dt)
    gap = gap_term(baumgarte, G[rows], scene.bodies, active)
    lam0 = warm[rows].reshape(len(rows), -1)
    v_next, lam, its, res, status = call(*args, lam0, threads=threads, GAP=gap, ACTIVE=active)
    ok = np.array([s == "converged" for s in status])
    cold = ~ok & (warm[rows] * active[..., None]).any((1, 2))         # a warm start may be what failed
    if cold.any():
        again = call(Q[rows][cold], V[rows][cold], TAU[cold], dt, np.zeros((cold.sum(), lam0.shape[1])),
                     threads=threads, GAP=None if gap is None else gap[cold], ACTIVE=active[cold])
        for whole, part in zip((v_next, lam, its, res), again[:4]):
            whole[cold] = part
        status = np.array(status, dtype=object)
        status[cold] = again[4]
        ok = np.array([s == "converged" for s in status])
    touching = active.any(1)
    out.iterations[k, rows], out.residuals[k, rows] = its, res
    out.statuses[k, rows] = np.where(ok, np.where(cold, COLD, np.where(touching, OK, FREE)), NOT_CONVERGED)
    f = np.zeros((len(rows), active.shape[1], 3))
    if touching.any():
        f[active] = np.asarray(lam).reshape(len(rows), -1, 3)[active] / dt
    out.forces[k, rows[ok]] = f[ok]
    warm[rows[ok]] = f[ok] * dt
    V[rows[ok]] = v_next[ok]

