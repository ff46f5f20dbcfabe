"""The compiled contact step (codegen/contact_step.py) loaded and called: its sealed .so opened once
(library.open_sealed, kind "step"), every argument checked before the C sees it (one-line InputError: finite
states, unit quaternions, dt, μ, normals, the solver options), one step or a batch (``<name>_step_batch`` on
runtime/pool.h's threads), and ``solve_problem``: the C solver loop alone on a given problem.  The checks are
shared by the step's batch, its derivatives (runtime/step_derivatives.py) and the MuJoCo-soft step."""
from __future__ import annotations

import ctypes

import numpy as np

from ..contact.residuals import Residuals
from ..contact.result import STATUS, STEP_OPTIONS, Options, Result, StepResult
from ..contact.step import auto_solver
from ..errors import InputError
from ..names import shown
from .batch import check_threads, cores
from .inputs import real_array, unit_q
from .artifact import BUILT_KINDS
from .library import entries, open_sealed, own_symbol

SOLVER_CODES = {"admm": 0, "pgs": 1}        # the C loop's solver codes (templates/contact_step.c.j2)
N_INFO = 5


DOUBLE_P, INT_P, BYTE_P, FLOAT_P = (ctypes.POINTER(t) for t in (ctypes.c_double, ctypes.c_int, ctypes.c_ubyte, ctypes.c_float))
MAX_BATCH = 2 ** 31 - 1     # the C batch entry points count states in an int
NORMAL_TOL = 1e-9           # |‖n‖ − 1| a contact normal may have


_POINTER_TYPES = {np.dtype(np.int32): INT_P, np.dtype(np.uint8): BYTE_P, np.dtype(np.float32): FLOAT_P}


def c_pointer(a):
    """An array as the C functions' pointer: int for int32 arrays, unsigned char for uint8 ones (an active-set mask),
    float for float32 ones (a single-precision rollout's), else double (None: NULL)."""
    return None if a is None else a.ctypes.data_as(_POINTER_TYPES.get(a.dtype, DOUBLE_P))


def c_address(a):
    """An array's data address as a ``ctypes.c_void_p`` argument (None: NULL), a third of c_pointer's cost where a call
    hands twenty arrays (the rollout's; a ctypes view of the array, which keeps it alive, costs half again).  A bare
    address keeps nothing alive: the caller holds the array until the C call returns."""
    return None if a is None else a.ctypes.data


# -- the checks of what a step is handed (shared by the step, its batch and its derivatives) --------------------------
def batch_size(q):
    """N for a batch Q (N × nq, N ≥ 1, at most MAX_BATCH), 0 for one q; an InputError for an empty batch."""
    a = real_array("q", q)
    if a.ndim != 2:
        return 0
    if not 0 < len(a) <= MAX_BATCH:
        raise InputError(f"q: a batch of {len(a)} states (1 to {MAX_BATCH} rows)")
    return len(a)


def check_state(name, x, size, batch=0):
    """``x`` as a C-contiguous float array of shape (size,) or (batch, size), finite; else an InputError."""
    a = np.ascontiguousarray(real_array(name, x))
    want = (batch, size) if batch else (size,)
    if a.shape != want:
        raise InputError(f"{name}: expected shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{name}: not finite (NaN or inf) at index {np.argwhere(~np.isfinite(a))[0].tolist()}")
    return a


def check_q(robot, q, batch=0):
    """q (or Q) as ``check_state`` takes it, its quaternions and (cos, sin) pairs normalised within
    runtime/inputs.UNIT_TOL of norm 1 and refused further off (``unit_q``: the generated functions' rule)."""
    return np.ascontiguousarray(unit_q(check_state("q", q, robot.nq, batch), robot.q_layout()))


def numbers(name, x):
    """``x`` as a float array when it holds real numbers that are not booleans (runtime/inputs.py real_array), else
    an InputError: a time step or a friction coefficient given as True is a mistake, not 1."""
    a = real_array(name, x)
    if a.dtype.kind == "b":
        raise InputError(f"{name}: expected numbers, got booleans {shown(x)}")
    return a.astype(float)


def check_mu(mu, nc):
    """μ per contact (a number or one per contact) as nc floats, each finite and ≥ 0; else an InputError."""
    a = numbers("mu", mu)
    if a.ndim > 1 or (a.ndim == 1 and len(a) != nc):
        raise InputError(f"mu: expected a number or {nc} values (one per contact), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise InputError(f"mu: friction coefficients must be finite and >= 0, got {shown(mu)}")
    return np.ascontiguousarray(np.broadcast_to(a, (nc,)), dtype=float)


def check_dt(dt, batch=0):
    """dt (s): one number for a step, one or one per state for a batch; finite and > 0.  A float, or (batch,)."""
    a = numbers("dt", dt)
    if a.shape not in ([(), (batch,)] if batch else [()]):
        raise InputError(f"dt: expected one number{f' or {batch} (one per state)' if batch else ''}, got shape "
                         f"{a.shape}")
    if not (np.all(np.isfinite(a)) and np.all(a > 0)):
        raise InputError(f"dt: must be finite and > 0, got {shown(dt)}")
    return np.ascontiguousarray(np.broadcast_to(a, (batch,))) if batch else float(a)


def check_normals(normals, nc, batch=0):
    """The contact normals as (batch or 1, n_c, 3) unit vectors, or None for +z: one normal (3,), one per contact
    (n_c × 3), or for a batch one set per state (batch × n_c × 3), each finite with |‖n‖ − 1| ≤ NORMAL_TOL."""
    if normals is None:
        return None
    n = real_array("normals", normals)
    shapes = [(3,), (nc, 3)] + ([(batch, nc, 3)] if batch else [])
    if n.shape not in shapes:
        raise InputError(f"normals: expected shape {' or '.join(map(str, shapes))}, got {n.shape}")
    n = np.ascontiguousarray(np.broadcast_to(n, (batch or 1, nc, 3)))
    if not np.all(np.isfinite(n)) or np.any(np.abs(np.linalg.norm(n, axis=-1) - 1) > NORMAL_TOL):
        raise InputError(f"normals: each contact's normal must be a finite unit vector (|n| = 1 to {NORMAL_TOL:g})")
    return n


def check_active(active, nc, batch=0):
    """The active-set mask (one flag per contact, True/1: the contact takes part; for a batch one mask, or one per
    state) as C-contiguous uint8 of shape (nc,) or (batch, nc); None stays None (every contact).  Anything but
    booleans or the numbers 0 and 1, or another shape, is an InputError."""
    if active is None:
        return None
    a = real_array("active", active)
    shapes = [(nc,)] + ([(batch, nc)] if batch else [])
    if a.shape not in shapes:
        raise InputError(f"active: expected a mask of shape {' or '.join(map(str, shapes))} (one flag per contact), "
                         f"got {a.shape}")
    if not np.all((a == 0) | (a == 1)):
        raise InputError(f"active: expected booleans (or 0 and 1), one per contact, got {shown(active)}")
    return np.ascontiguousarray(np.broadcast_to(a, (batch, nc)) if batch else a, dtype=np.uint8)


def thread_count(threads):
    """``threads`` for a batch: runtime/batch.py's rule (check_threads: None or an integer from 1 to MAX_THREADS, as
    the generated functions' door takes it), None meaning one per usable core."""
    check_threads(threads)
    return cores() if threads is None else int(threads)


class CompiledStep:
    """The compiled contact step at the sealed manifest ``path`` for ``robot`` and its contacts (a ConstraintSet),
    solved by ``solver`` ("admm" or "pgs"), the exact problem unless not ``exact``, ``fallback``: ADMM where PGS does
    not converge (solver "auto"), ``mu`` the default friction per contact (stepping/contact.py ContactStep builds
    it)."""

    def __init__(self, path, robot, contacts, solver, exact, fallback, mu):
        self.robot, self.contacts = robot, contacts
        self.solver, self.exact, self.fallback = solver, exact, fallback
        self.nc = self.contacts.m // 3
        self.mu = check_mu(mu, self.nc)
        self.so = path.with_suffix(".so")
        self.manifest, lib, mapped = open_sealed(path, BUILT_KINDS, "step")
        fn = self.manifest["function"]
        self._step, self._batch, self._step_gap, self._batch_gap = entries(lib, mapped, self.so, fn, [
            ("_step", [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_double, *[DOUBLE_P] * 8]),
            ("_step_batch", [ctypes.c_int, *[DOUBLE_P] * 12, ctypes.c_int]),
            ("_step_gap", [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_double, *[DOUBLE_P] * 9]),
            ("_step_gap_batch", [ctypes.c_int, *[DOUBLE_P] * 13, ctypes.c_int])])
        self._step_active, self._batch_active = entries(lib, mapped, self.so, fn, [
            ("_step_active", [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_double, *[DOUBLE_P] * 5, BYTE_P, *[DOUBLE_P] * 4]),
            ("_step_active_batch", [ctypes.c_int, *[DOUBLE_P] * 9, BYTE_P, *[DOUBLE_P] * 4, ctypes.c_int])])
        self._problem = (own_symbol(lib, mapped, fn + "_problem", argtypes=[DOUBLE_P] * 8, label=self.so)
                         if hasattr(lib, fn + "_problem") else None)     # the dense route's solver alone
        self._lib = lib

    def __call__(self, q, v, tau, dt=1e-3, lam0=None, tol=Options.tol, max_iter=Options.max_iter, mu=None, normals=None,
                 rho=Options.rho, eta=Options.eta, omega=Options.omega, threads=1, gap=None, active=None):
        """One step from (q, v, τ), or N steps from (Q, V, TAU) with the batch first (``threads``
        POSIX threads; None: one per core); ``lam0`` warm-starts λ (contact frames), ``mu`` overrides the friction,
        ``normals`` (n_c × 3, unit) sets each contact's normal (default +z), ``gap`` (m/s, one per
        contact, N × n_c for a batch) is added to g's normal rows (``<name>_step_gap``: e.g. a
        Baumgarte β·min(d, 0)/dt), so the solve asks σ_n ≥ −gap; ``sigma`` stays the contact velocity
        Gλ + g, the residuals are those of the shifted problem.  ``active`` (a bool per contact, N × n_c for a
        batch; None: every contact) solves the problem of the flagged contacts alone (G[A, A], g[A]: the C
        keep_active, as the C rollout does), every other contact's λ and σ exactly 0; a step built with solver "auto"
        then picks the solver per active set (contact/step.py auto_solver).  Every argument is checked first
        (one-line InputError): finite states, unit quaternions (``check_q``), dt, μ, normals, the mask, the solver
        options."""
        batch = batch_size(q)
        active = check_active(active, self.nc, batch)
        opts = {s: solver_options(tol, max_iter, s, self.exact, rho, eta, omega, self.fallback)
                for s in ({self.solver} if active is None or not self.fallback else SOLVER_CODES)}
        try:
            if active is None or not self.fallback:
                return self._call(batch, q, v, tau, dt, lam0, opts[self.solver], mu, normals, threads, gap, active)
            return self._auto(batch, q, v, tau, dt, lam0, opts, mu, normals, threads, gap, active)
        except MemoryError:
            raise InputError(f"a batch of {batch} states does not fit in memory") from None

    def _auto(self, batch, q, v, tau, dt, lam0, opts, mu, normals, threads, gap, active):
        """The masked call of a step built with solver "auto": each active set's solver (auto_solver), a batch in
        one call per solver picked, its rows put back in order."""
        if not batch:
            return self._call(0, q, v, tau, dt, lam0, opts[auto_solver(self.contacts, active)], mu, normals, threads,
                              gap, active)
        sets, which = np.unique(active, axis=0, return_inverse=True)
        picks = np.array([auto_solver(self.contacts, a) for a in sets])[np.reshape(which, -1)]
        if len(set(picks)) == 1:
            return self._call(batch, q, v, tau, dt, lam0, opts[picks[0]], mu, normals, threads, gap, active)
        parts = {}
        for s in SOLVER_CODES:
            rows = picks == s
            parts[s] = self._call(int(np.sum(rows)), *(_rows(x, rows, batch) for x in (q, v, tau)), _rows(dt, rows, batch, 1),
                                  _rows(lam0, rows, batch), opts[s], mu, _rows(normals, rows, batch, 3), threads,
                                  _rows(gap, rows, batch), active[rows])
        return _merged(parts, picks)

    def _call(self, batch, q, v, tau, dt, lam0, opts, mu, normals, threads, gap, active=None):
        """The checked call of ``__call__`` (``opts``: solver_options, ``active``: check_active's)."""
        r, m = self.robot, self.contacts.m
        q = check_q(r, q, batch)
        v, tau = (check_state(n, x, r.nv, batch) for n, x in (("v", v), ("tau", tau)))
        dt = check_dt(dt, batch)
        mu_a = self.mu if mu is None else check_mu(mu, self.nc)
        n = check_normals(normals, self.nc, batch)
        lam0 = None if lam0 is None else check_state("lam0", lam0, m, batch)
        gap = None if gap is None else check_state("gap", gap, self.nc, batch)
        shape = (batch,) if batch else ()
        v_next, lam, sigma, info = (np.empty(shape + (k,)) for k in (r.nv, m, m, N_INFO))
        ptr = c_pointer
        outs = (ptr(v_next), ptr(lam), ptr(sigma), ptr(info))
        if batch:
            threads = thread_count(threads)
            mus = np.ascontiguousarray(np.broadcast_to(mu_a, (batch, self.nc)))
            head = (batch, ptr(q), ptr(v), ptr(tau), ptr(dt), ptr(mus), ptr(n), ptr(lam0), ptr(opts))
            if active is not None:
                self._batch_active(*head, ptr(gap), ptr(active), *outs, threads)
            elif gap is not None:
                self._batch_gap(*head, ptr(gap), *outs, threads)
            else:
                self._batch(*head, *outs, threads)
            return _result(lam, sigma, v_next, info, batch)
        head = (ptr(q), ptr(v), ptr(tau), dt, ptr(mu_a), ptr(n), ptr(lam0), ptr(opts))
        failed = (self._step_active(*head, ptr(gap), ptr(active), *outs) if active is not None else
                  self._step_gap(*head, ptr(gap), *outs) if gap is not None else self._step(*head, *outs))
        if failed:
            raise InputError("the generated step failed to evaluate")
        return _result(lam, sigma, v_next, info, batch)

    def solve_problem(self, G, g, mu=None, lam0=None, tol=Options.tol, max_iter=Options.max_iter, rho=Options.rho,
                      eta=Options.eta, omega=Options.omega):
        """The compiled solver loop alone (``<name>_problem``: what the step runs after computing G and g) on a given
        problem of this step's size: G (m × m, symmetric), g (m), μ, warm start λ₀; a Result as the NumPy solvers'
        (contact/admm.py, pgs.py).  A saved hard problem runs through the C loop on any robot of m contact rows.  The
        dense linear-solve route only (the matrix-free route's damped inverse is that of the robot's own G)."""
        if self._problem is None:
            raise InputError("solve_problem needs a step built with linear_solve='dense' (this one is matrix-free)")
        m = self.contacts.m
        opts = solver_options(tol, max_iter, self.solver, self.exact, rho, eta, omega, self.fallback)
        G = real_array("G", G)
        if G.shape != (m, m) or not np.all(np.isfinite(G)):
            raise InputError(f"G: expected a finite {m} x {m} matrix, got shape {G.shape}")
        if np.any(np.abs(G - G.T) > 1e-12 * np.max(np.abs(G))):
            raise InputError("G: must be symmetric (to 1e-12 of its largest entry)")
        g = check_state("g", g, m)
        mu_a = self.mu if mu is None else check_mu(mu, self.nc)
        lam0 = None if lam0 is None else check_state("lam0", lam0, m)
        lam, sigma, info = np.empty(m), np.empty(m), np.empty(N_INFO)
        G = np.asfortranarray(G)
        self._problem(*map(c_pointer, (G, g, mu_a, lam0, opts, lam, sigma, info)))
        return Result(lam, sigma, int(info[0]), Residuals(*map(float, info[1:4])), STATUS[int(info[4])])


def solver_options(tol, max_iter, solver, exact, rho=Options.rho, eta=Options.eta, omega=Options.omega, fallback=False):
    """The C loop's opts[] (contact/result.py STEP_OPTIONS, the layout codegen/templates/contact_step.c.j2's enum is
    rendered from) for ``solver`` ("admm" or "pgs"), each value checked as the NumPy solvers' Options checks it;
    ``fallback``: ADMM where PGS does not converge (solver "auto", contact/__init__.py pgs_then_admm)."""
    return Options(tol, max_iter, rho, eta, omega).packed(STEP_OPTIONS, solver=SOLVER_CODES[solver], exact=exact,
                                                          fallback=fallback)

def _rows(x, rows, batch, per_state_ndim=2):
    """The rows ``rows`` (a bool per state) of a batch argument ``x`` given per state (ndim ``per_state_ndim``), else
    ``x`` as it is (one value for every state, or None)."""
    a = None if x is None else np.asarray(x)
    return a[rows] if a is not None and a.ndim == per_state_ndim and len(a) == batch else x


def _merged(parts, picks):
    """One batch StepResult from {solver: the StepResult of its rows} (``picks``: each state's solver)."""
    out = {}
    for field in ("lam", "sigma", "v_next", "iterations", "residuals"):
        first = np.asarray(getattr(parts[picks[0]], field))
        whole = np.empty((len(picks),) + first.shape[1:], dtype=first.dtype)
        for s, r in parts.items():
            whole[picks == s] = getattr(r, field)
        out[field] = whole
    status = np.empty(len(picks), dtype=object)
    for s, r in parts.items():
        status[picks == s] = r.status
    return StepResult(out["lam"], out["sigma"], out["v_next"], out["iterations"], out["residuals"], list(status))


def _result(lam, sigma, v_next, info, batch):
    """StepResult from the C outputs (info rows: iterations, three residuals, status)."""
    if batch:
        return StepResult(lam, sigma, v_next, info[:, 0].astype(int), info[:, 1:4].copy(),
                          [STATUS[int(s)] for s in info[:, 4]])
    return StepResult(lam, sigma, v_next, int(info[0]), Residuals(*map(float, info[1:4])), STATUS[int(info[4])])
