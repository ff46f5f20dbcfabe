"""The compiled contact step: for one robot and one set of point contacts, a C function

    <name>_step(q, v, tau, dt, mu[], normals, lambda_warm, opts, out v_next, out lambda, out sigma, out info)

that takes one velocity-level time step with frictional contact (Pinocchio 4's convention;
Carpentier et al. 2024, RSS): v_free = v + dt·ABA(q, v, τ), G = J M⁻¹ Jᵀ, g = J v_free, the
ADMM or PGS solve of contact/admm.py or contact/pgs.py for λ (an impulse, N·s) and
σ = Gλ + g, then v_next = v_free + M⁻¹ Jᵀ λ.  The per-robot parts are SX traced once and
emitted by CasADi (``<name>_prep``: v_free, G by the registry's cheapest Delassus algorithm,
g, and the stored q-only part of ``<name>_post``: M⁻¹ Jᵀ λ by ABA with neither velocity nor
gravity, PV paper ../shared/papers/004_52dd6d88d839fc14.txt Sec. IV; ``<name>_factor`` and
``<name>_solve``: the damped inverse (G + ρI)⁻¹ by LDLᵀ); the iteration loop is the hand-written C
of templates/step.c.j2 (and ``<name>_step_batch`` runs it over N states on POSIX threads).

Contacts are point candidates ``LINK[@x,y,z]`` (contact/candidates.py; the constraint
``LINK:3d-world[@x,y,z]``: rows along world x,
y, z = [t₁, t₂, n] for the ground plane z = 0); a unit normal per contact given at run time
turns each contact's rows into the frame [t₁, t₂, n] of ``contact_frames``."""
from __future__ import annotations

import collections
import copy
from collections.abc import Sequence
from typing import Any

import numpy.typing as npt
import ctypes
import hashlib
import json
from pathlib import Path

import casadi as ca
import numpy as np

from ..version import __version__
from ..runtime import artifact
from ..codegen.build import BUILT_KINDS, build_cached, host_cpu, resolve_cflags, source_hash
from ..runtime.batch import check_threads, cores
from ..runtime.library import entries, open_sealed, own_symbol
from ..runtime.compiler import find_compiler
from ..runtime.door import POOL
from ..model import RobotLike
from ..progress import silenced
from ..runtime.inputs import real_array, unit_q
from ..codegen import schedule, sincos
from ..codegen.emit import TEMPLATES as CODEGEN_TEMPLATES, casadi_source
from ..codegen.escape import Safe, environment
from ..codegen.staging import split
from ..codegen.trace import choose_cheapest
from ..constraints import ConstraintSet
from ..errors import ConstraintError, InputError
from ..model import load_robot
from ..names import shown
from ..opcount import count_ops
from ..registry import AUTO, get_algorithm
from ..symbolic import linalg
from ..symbolic.frames import local_transforms
from ..sweeps.joint_space import constraint_jacobian
from . import admm
from .candidates import FORM, point_specs
from .residuals import Residuals
from .result import STATUS, STEP_OPTIONS, Options, Result, StepResult

TEMPLATES = environment("casadi_delassus", "contact/templates")
# ADMM's Anderson acceleration (contact/admm.py), the C loop's constants
ANDERSON = {"after": admm.ANDERSON_AFTER, "memory": admm.ANDERSON_MEMORY, "safeguard": admm.ANDERSON_SAFEGUARD,
            "reg": admm.ANDERSON_REG}
SOLVER_CODES = {"admm": 0, "pgs": 1}
STEP_SOLVERS = ("auto", *SOLVER_CODES)
N_INFO = 5
DEFAULT_OUT = Path("codegen_out")
DEFAULT_CFLAGS = ("auto",)      # codegen/build.py resolve_cflags: level by size, math flags, the host CPU
# The solver loop runs its iterations in the same file as prep/post, so "auto" keeps -O2 up to this many prep+post
# instructions, where codegen/build.py's AUTO_LEVELS (sized for one evaluation per call) already give -O1.
STEP_O2_UP_TO = 40_000
# ADMM's linear solve (G + (ρ+η) I)⁻¹ b: "dense" (G's LDLᵀ, m³/6 per refactorization, m² per solve) or
# "matrix_free" (damped_inverse_apply staged, O(n + m) each); "auto" takes the one with fewer instructions for a
# step of issue 25's problems: 5 iterations, 2 refactorizations (talos_stand, go1_stand).  The PGS loop reads G only.
LINEAR_SOLVES = ("auto", "dense", "matrix_free")
LINEAR_SOLVE_ITERATIONS, LINEAR_SOLVE_FACTORS = 5, 2


def contact_frames(normals):
    """R_i (n_c × 3 × 3, rows t₁, t₂, n) for unit normals n_i: t₁ is e_x (e_y when |n_x| > 0.9)
    with its n-component removed, normalised; t₂ = n × t₁.  For n = +z, R = I."""
    n = np.asarray(normals, dtype=float).reshape(-1, 3)
    e = np.where(np.abs(n[:, :1]) > 0.9, [0.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    t = e - np.sum(e * n, axis=1, keepdims=True) * n
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return np.stack([t, np.cross(n, t), n], axis=1)


def check_contacts(robot, contacts):
    """The ConstraintSet of the contacts: one or more point candidates (contact/candidates.py), nothing else."""
    specs = point_specs(robot, contacts)
    if not specs:
        raise ConstraintError(f"no contacts: give at least one contact candidate {FORM} (a point: no /r for the step)")
    cs = ConstraintSet.parse(robot, specs)
    if robot.q_convention != "pinocchio":
        raise ConstraintError(f"robot {robot.name!r}: the contact step takes models with Pinocchio's q layout "
                              f"(URDF, SDF, synthetic), not {robot.q_convention!r} ones")
    return cs


def auto_solver(cs):
    """The solver ``solver="auto"`` picks: ADMM when some body carries more than two point contacts (their rows then
    outnumber the body's six velocities: G is singular and PGS's sweeps crawl, as on talos_stand's eight sole
    corners), else PGS (go1's four feet: fewer iterations when contacts slide, cheaper sweeps); docs/contact.md has
    the bench's numbers."""
    per_body = collections.Counter(c.body for c in cs.constraints)
    return "admm" if max(per_body.values()) > 2 else "pgs"


def minv_apply(robot, cs, q, K_bodies, f):
    """M(q)⁻¹ f (SX): ABA without velocity and gravity."""
    still = copy.copy(robot)
    still.gravity = np.zeros(3)
    return get_algorithm("aba").fn(still, cs, q, K_bodies, ca.SX.zeros(robot.nv), f)["vdot"]


def step_functions(robot, cs, name, delassus=AUTO, damped_first=None):
    """(prep, post, Delassus algorithm): the per-robot casadi.Functions of the step.  M⁻¹Jᵀλ is
    staged (codegen/staging.py): what it needs of q alone (transforms, articulated inertias) is
    computed in prep, where cse shares it with ABA and the Delassus algorithm, and handed to
    post as the vector ``w``.  ``damped_first``: the matrix-free damped inverse's q stage
    (matrix_free_functions), whose ``w_q`` prep then computes too (output ``wd``)."""
    if delassus == AUTO:
        delassus = choose_cheapest(robot, cs)[0]
    q, v, tau, dt, lam = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", robot.nv), ("tau", robot.nv),
                                                         ("dt", 1), ("lam", cs.m)))
    K_bodies = cs.symbolic_K_bodies(q, {})
    aba = get_algorithm("aba").fn
    v_free = v + dt * aba(robot, cs, q, K_bodies, v, tau)["vdot"]
    G = get_algorithm(delassus).fn(robot, cs, q, K_bodies)["delassus"]
    T = local_transforms(robot, q)
    J = constraint_jacobian(robot, cs, T, K_bodies)    # unslid: v's own frames
    for i, body in enumerate(robot.bodies):            # MuJoCo's free joints: v_lin = E ṗ (sweeps/tree.py)
        if body.joint.mujoco_velocity:
            J[:, body.v_index:body.v_index + 3] = ca.mtimes(J[:, body.v_index:body.v_index + 3], T[i].X.E)
    dv = minv_apply(robot, cs, q, K_bodies, ca.mtimes(J.T, lam))
    first, last = split(ca.Function("post", [q, lam], [ca.densify(dv)], ["q", "lam"], ["dv"]),
                        [("q", ["q"]), ("lam", ["lam"])])
    extra = [damped_first(q)] if damped_first is not None else []
    prep = ca.Function(f"{name}_prep", [q, v, tau, dt],
                       ca.cse([ca.densify(v_free), ca.densify(G), ca.densify(J @ v_free), first.function(q), *extra]),
                       ["q", "v", "tau", "dt"], ["v_free", "G", "g", "w", *(["wd"] if extra else [])])
    post = ca.Function(f"{name}_post", last.function.sx_in(), ca.cse(last.function.call(last.function.sx_in())),
                       ["lam", "w"], ["dv"])
    return prep, post, delassus


def matrix_free_functions(robot, cs, name):
    """(q stage, factor, solve): the damped inverse (G + d I)⁻¹ b = (R⁻¹ + J M⁻¹ Jᵀ)⁻¹ b with the stiffness
    R = 1/d on every row, by the registry's ``damped_inverse_apply`` (matrix-free paper
    ../shared/papers/001_a194bdf892a0cc2c.txt, Sec. V: matrix inversion lemma + loop-constrained ABA, O(n + m))
    staged as its Sec. VI-B re-evaluates it (codegen/staging.py): what q alone gives (its ``w_q``, computed in
    prep), ``<name>_factor(R, w_q)`` when ρ changes, ``<name>_solve(b, w_R)`` at every iteration."""
    q, R, b = ca.SX.sym("q", robot.nq), ca.SX.sym("R", cs.m), ca.SX.sym("lam", cs.m)
    x = get_algorithm("damped_inverse_apply").fn(robot, cs, q, cs.symbolic_K_bodies(q, {}), R=R, lam=b)
    f = ca.Function("damped", [q, R, b], [ca.densify(x["damped_inverse_apply"])], ["q", "R", "lam"], ["x"])
    first, damping, apply = split(f, [("q", ["q"]), ("R", ["R"]), ("lam", ["lam"])])
    factor = ca.Function(f"{name}_factor", damping.function.sx_in(), ca.cse(damping.function.call(damping.function.sx_in())),
                         damping.function.name_in(), ["factors"])
    solve = ca.Function(f"{name}_solve", apply.function.sx_in(), ca.cse(apply.function.call(apply.function.sx_in())),
                        apply.function.name_in(), ["x"])
    return first.function, factor, solve


def without_damped(prep):
    """prep without the matrix-free damped inverse's q stage (its fifth output, ``wd``)."""
    outs = prep.call(prep.sx_in())[:4]
    return ca.Function(prep.name(), prep.sx_in(), outs, prep.name_in(), prep.name_out()[:4])


def linear_solve_costs(prep, mf_factor, mf_solve, m, name):
    """{route: instructions of one step's linear solves}: LINEAR_SOLVE_FACTORS refactorizations and
    LINEAR_SOLVE_ITERATIONS solves, plus for the matrix-free route what its q stage adds to ``prep`` (a prep
    with ``wd``: little, cse shares the stage with ABA and the Delassus algorithm)."""
    factor, solve = damped_inverse_functions(m, name)
    n = lambda f: count_ops(f)["instructions"]     # noqa: E731
    return {"dense": LINEAR_SOLVE_FACTORS * n(factor) + LINEAR_SOLVE_ITERATIONS * n(solve),
            "matrix_free": n(prep) - n(without_damped(prep)) + LINEAR_SOLVE_FACTORS * n(mf_factor)
            + LINEAR_SOLVE_ITERATIONS * n(mf_solve)}


def step_parts(robot, cs, name, delassus, linear_solve):
    """(prep, post, Delassus algorithm, factor, solve, route): the step's casadi.Functions with ADMM's linear solve
    by ``linear_solve`` ("dense", "matrix_free", or "auto": the fewer instructions, linear_solve_costs)."""
    if linear_solve not in LINEAR_SOLVES:
        raise InputError(f"unknown linear_solve {linear_solve!r} (known: {', '.join(LINEAR_SOLVES)})")
    if linear_solve == "dense":
        return (*step_functions(robot, cs, name, delassus), *damped_inverse_functions(cs.m, name), "dense")
    first, factor, solve = matrix_free_functions(robot, cs, name)
    prep, post, chosen = step_functions(robot, cs, name, delassus, first)
    if linear_solve == "auto":
        costs = linear_solve_costs(prep, factor, solve, cs.m, name)
        if costs["dense"] <= costs["matrix_free"]:
            return without_damped(prep), post, chosen, *damped_inverse_functions(cs.m, name), "dense"
    return prep, post, chosen, factor, solve, "matrix_free"


def damped_inverse_functions(m, name):
    """(factor, solve): ``<name>_factor(G, d)`` → the LDLᵀ factors of G + d I packed as one vector
    (L below the diagonal, row by row, then D⁻¹), by symbolic/linalg.py's ldl over a symbolic m×m
    G, and ``<name>_solve(factors, b)`` → (G + d I)⁻¹ b: ADMM's linear solve, straight-line code."""
    G, d = ca.SX.sym("G", m, m), ca.SX.sym("d")
    L, _, Dinv = linalg.ldl({(i, j): G[i, j] + d if i == j else G[i, j] for i in range(m) for j in range(i, m)}, m)
    keys = sorted(L)
    factor = ca.Function(f"{name}_factor", [G, d], [ca.vertcat(*[L[k] for k in keys], *Dinv)], ["G", "d"], ["factors"])
    fac, b = ca.SX.sym("factors", len(keys) + m), ca.SX.sym("b", m)
    x = linalg.ldl_solve(({k: fac[n] for n, k in enumerate(keys)}, None, [fac[len(keys) + i] for i in range(m)]),
                         [b[i] for i in range(m)])
    return factor, ca.Function(f"{name}_solve", [fac, b], [ca.vertcat(*x)], ["factors", "b"], ["x"])


def render(robot, cs, name, prep, post, delassus, factor, solve, companions=()):
    """The step's C source; ``companions`` (casadi.Functions) are emitted with its own (contact/rollout.py's kinematics)."""
    functions = (prep, post, factor, solve, *companions)
    sizes = {k: max(int(getattr(f, k)()) for f in functions) for k in ("sz_arg", "sz_res", "sz_iw", "sz_w")}
    matrix_free = prep.n_out() > 4
    return TEMPLATES.get_template("step.c.j2").render(
        fname=Safe(name), robot=robot.name, contacts=" ".join(cs.specs), version=__version__, delassus=delassus,
        casadi_code=Safe(sincos.hoist(schedule.reorder(casadi_source(prep, functions[1:])), CODEGEN_TEMPLATES)[0]), nq=robot.nq, nv=robot.nv, m=cs.m, nc=cs.m // 3,
        nfac=int(factor.numel_out(0)), nw=int(prep.numel_out(3)), nwd=int(prep.numel_out(4)) if matrix_free else 0,
        matrix_free=matrix_free, anderson=ANDERSON, options=STEP_OPTIONS, pool_code=Safe(POOL.read_text()), **sizes)


def build_key(robot, cs, cflags, cc, **extra):
    """The cache key of a compiled contact file: a hash of what determines it (the package's
    source and version, the robot, the contacts, the compiler and its flags, and ``extra``)."""
    return hashlib.sha256(json.dumps({"source": source_hash(), "robot": robot.describe(), "contacts": cs.describe(),
                                      "cflags": list(cflags), "cc": cc, "version": __version__, **extra},
                                     sort_keys=True).encode()).hexdigest()


def scenario_name(prefix, specs):
    """The folder of a contact set given as specs: ``prefix`` and a hash of the specs."""
    return f"{prefix}-" + hashlib.sha256("\n".join(specs).encode()).hexdigest()[:8]


def step_cflags(cflags, instructions, cc):
    """resolve_cflags's flags for the step's file, with -O1 raised to -O2 up to STEP_O2_UP_TO instructions."""
    flags = resolve_cflags(cflags, instructions, cc)
    return tuple("-O2" if f == "-O1" and instructions <= STEP_O2_UP_TO else f for f in flags)


def build(robot, cs, scenario, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, model=None,
          linear_solve="auto"):
    """Compile the step (cached by a hash of everything that determines it); returns its manifest's path (sealed:
    load it with runtime/library.open_sealed).
    ``linear_solve``: ADMM's damped inverse, "dense", "matrix_free" or "auto" (step_parts)."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    name = artifact.function_name(model, scenario, "contact")
    auto = any(f.startswith("auto") for f in cflags)
    key = build_key(robot, cs, cflags, cc, delassus=delassus, host=host_cpu() if auto else None,
                    linear_solve=linear_solve)

    def make():
        prep, post, chosen, factor, solve, route = step_parts(robot, cs, name, delassus, linear_solve)
        flags = step_cflags(cflags, sum(count_ops(f)["instructions"] for f in (prep, post)), cc) if auto else cflags
        manifest = {"function": name, "robot": robot.name, "contacts": cs.specs, "delassus": chosen,
                    "linear_solve": route, "nq": robot.nq, "nv": robot.nv, "m": cs.m, "cflags": list(flags),
                    "version": __version__}
        return render(robot, cs, name, prep, post, chosen, factor, solve), [*flags, "-pthread"], manifest
    return build_cached(artifact.folder(out_dir, model, scenario), f"contact_{key[:16]}", make, cc, key, "step")


DOUBLE_P, INT_P = ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_int)
MAX_BATCH = 2 ** 31 - 1     # the C batch entry points count states in an int
NORMAL_TOL = 1e-9           # |‖n‖ − 1| a contact normal may have


def c_pointer(a):
    """An array as the C functions' pointer: int for int32 arrays, else double (None: NULL)."""
    return None if a is None else a.ctypes.data_as(INT_P if a.dtype == np.int32 else DOUBLE_P)


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


def thread_count(threads):
    """``threads`` for a batch: runtime/batch.py's rule (check_threads: None or an integer from 1 to MAX_THREADS, as
    the generated functions' door takes it), None meaning one per usable core."""
    check_threads(threads)
    return cores() if threads is None else int(threads)


class ContactStep:
    """A compiled contact step for one robot and contact set (``contact_step``)."""

    def __init__(self, robot, contacts, solver="auto", mu=0.8, relaxed=False, out_dir=DEFAULT_OUT,
                 cflags=DEFAULT_CFLAGS, cc=None, delassus=AUTO, name=None, linear_solve="auto"):
        if not isinstance(solver, str) or solver not in STEP_SOLVERS:
            raise InputError(f"unknown contact solver {shown(solver)} (known: {', '.join(STEP_SOLVERS)})")
        self.robot = load_robot(robot)
        self.contacts = check_contacts(self.robot, contacts)
        self.solver, self.exact = auto_solver(self.contacts) if solver == "auto" else solver, not relaxed
        self.fallback = solver == "auto"            # auto's PGS hands a solve it cannot finish to ADMM
        self.nc = self.contacts.m // 3
        self.mu = check_mu(mu, self.nc)
        scenario = scenario_name("contact", self.contacts.specs)
        path = build(self.robot, self.contacts, scenario, out_dir, tuple(cflags), cc, delassus, name, linear_solve)
        self.so = path.with_suffix(".so")
        self.manifest, lib, mapped = open_sealed(path, BUILT_KINDS, "step")
        fn = self.manifest["function"]
        self._step, self._batch, self._step_gap, self._batch_gap = entries(lib, mapped, self.so, fn, [
            ("_step", [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_double, *[DOUBLE_P] * 8]),
            ("_step_batch", [ctypes.c_int, *[DOUBLE_P] * 12, ctypes.c_int]),
            ("_step_gap", [DOUBLE_P, DOUBLE_P, DOUBLE_P, ctypes.c_double, *[DOUBLE_P] * 9]),
            ("_step_gap_batch", [ctypes.c_int, *[DOUBLE_P] * 13, ctypes.c_int])])
        self._problem = (own_symbol(lib, mapped, fn + "_problem", argtypes=[DOUBLE_P] * 8, label=self.so)
                         if hasattr(lib, fn + "_problem") else None)     # the dense route's solver alone
        self._lib = lib

    def __call__(self, q, v, tau, dt=1e-3, lam0=None, tol=Options.tol, max_iter=Options.max_iter, mu=None, normals=None,
                 rho=Options.rho, eta=Options.eta, omega=Options.omega, threads=1, gap=None):
        """One step from (q, v, τ), or N steps from (Q, V, TAU) with the batch first (``threads``
        POSIX threads; None: one per core); ``lam0`` warm-starts λ (contact frames), ``mu`` overrides the friction,
        ``normals`` (n_c × 3, unit) sets each contact's normal (default +z), ``gap`` (m/s, one per
        contact, N × n_c for a batch) is added to g's normal rows (``<name>_step_gap``: e.g. a
        Baumgarte β·min(d, 0)/dt), so the solve asks σ_n ≥ −gap; ``sigma`` stays the contact velocity
        Gλ + g, the residuals are those of the shifted problem.  Every argument is checked first (one-line
        InputError): finite states, unit quaternions (``check_q``), dt, μ, normals, the solver options."""
        batch = batch_size(q)
        try:
            return self._call(batch, q, v, tau, dt, lam0, solver_options(tol, max_iter, self.solver, self.exact, rho,
                                                                          eta, omega, self.fallback), mu, normals, threads, gap)
        except MemoryError:
            raise InputError(f"a batch of {batch} states does not fit in memory") from None

    def _call(self, batch, q, v, tau, dt, lam0, opts, mu, normals, threads, gap):
        """The checked call of ``__call__`` (``opts``: solver_options)."""
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
            if gap is None:
                self._batch(*head, *outs, threads)
            else:
                self._batch_gap(*head, ptr(gap), *outs, threads)
            return _result(lam, sigma, v_next, info, batch)
        head = (ptr(q), ptr(v), ptr(tau), dt, ptr(mu_a), ptr(n), ptr(lam0), ptr(opts))
        if self._step(*head, *outs) if gap is None else self._step_gap(*head, ptr(gap), *outs):
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
    """The C loop's opts[] (result.py STEP_OPTIONS, the layout templates/step.c.j2's enum is rendered from) for
    ``solver`` ("admm" or "pgs"), each value checked as the NumPy solvers' Options checks it; ``fallback``: ADMM where
    PGS does not converge (solver "auto", contact/__init__.py pgs_then_admm)."""
    return Options(tol, max_iter, rho, eta, omega).packed(STEP_OPTIONS, solver=SOLVER_CODES[solver], exact=exact,
                                                          fallback=fallback)


def _result(lam, sigma, v_next, info, batch):
    """StepResult from the C outputs (info rows: iterations, three residuals, status)."""
    if batch:
        return StepResult(lam, sigma, v_next, info[:, 0].astype(int), info[:, 1:4].copy(),
                          [STATUS[int(s)] for s in info[:, 4]])
    return StepResult(lam, sigma, v_next, int(info[0]), Residuals(*map(float, info[1:4])), STATUS[int(info[4])])


def contact_step(robot: RobotLike, contacts: str | Sequence[str], solver: str = "auto", mu: float | npt.ArrayLike = 0.8,
                 relaxed: bool = False, quiet: bool = False, **build_options: Any) -> ContactStep:
    """A compiled contact step ``s`` for ``robot`` (anything ``load_robot`` takes) and
    ``contacts`` (point candidates ``LINK[@x,y,z]``, contact/candidates.py, or a scenario name): ``s(q, v, tau, dt=1e-3, lam0=None,
    tol=Options.tol, max_iter=Options.max_iter)`` → StepResult (``.lam``, ``.sigma``, ``.v_next``,
    ``.iterations``, ``.residuals``, ``.status``); ``s(Q, V, TAU)`` steps a batch.
    ``solver`` "auto" (the default: auto_solver), "admm" or "pgs"; ``relaxed=True`` solves the convex relaxation instead of the
    exact (De Saxcé) problem; ``build_options``: out_dir, cflags, cc, delassus, name, and linear_solve
    (ADMM's damped inverse: "auto", the default, "dense" or "matrix_free": LINEAR_SOLVES, step_parts; the
    manifest's ``linear_solve`` says which was built).  ``quiet=True``: no progress on stderr while it builds."""
    with silenced(quiet):
        return ContactStep(robot, contacts, solver, mu, relaxed, **build_options)
