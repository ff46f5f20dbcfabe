"""Time stepping on the contact step: semi-implicit Euler with an active set per step.

One step (issue 27; the velocity-level scheme of Carpentier et al. 2024, "From compliant to
rigid contact simulation: a unified and efficient approach", RSS, Sec. III, which Pinocchio 4's
solvers and the compiled step of issue 25 solve), for the time t = k dt:

    d   = signed distances of the contact candidates to the ground (forward kinematics)
    A   = {i : d_i ≤ margin}                                  the active set
    τ   = controller(t, q, v)
    v⁺  = step(q, v, τ, dt, λ₀ = the previous impulses, A)       frictional contact solve on A
    q⁺  = q ⊕ dt v⁺                                          the model's own integrate

The velocity v⁺ is the end-of-step one (semi-implicit, or symplectic, Euler); ⊕ is
model/integrate.py (Pinocchio's convention for URDF, mj_integratePos for MJCF).  The ground
is the halfspace {x : n·x ≥ h} of any unit normal n; a candidate is a point fixed on a body, or a
sphere (centre and radius) whose friction point is its lowest point at q₀, fixed on the body.
Baumgarte stabilisation (β > 0, on by default: BAUMGARTE) asks the normal contact velocity to close the
penetration in 1/β steps: σ_n ≥ −β d⁻/dt, d⁻ the deepest min(d, 0) among the active contacts of the contact's
body (gap_term), the gap term of issue 25's g (the compiled step's ``gap``).  Without it a landing leaves the contacts as deep as the last step before touching carried
them (up to |v| dt, 0.4–0.9 mm on quadrupeds and humanoids dropped a few cm at dt = 1 ms) for ever.

Under a fixed linear feedback (feedback.py: LinearFeedback, pd_controller) on the compiled step,
the whole loop runs as one C call instead (rollout.py), with the same statuses and records.

The step comes from a factory (``step_factory``), built once for every candidate: the compiled
step ``contact_step`` of this package by default, or the NumPy reference (reference_steps) that
tests and benches use as an oracle.  Each call takes the active set as a mask (``active``): the solve
on the active contacts' G[A, A], the others' impulses exactly 0 (the compiled step's keep_active,
codegen/templates/contact_step.c.j2), the one mechanism the C rollout uses too; a step with no active
contact is free_step's.

A solve that fails from its warm start is tried once more from λ₀ = 0 (status "ok after a cold
start" when that one converges).  Every step records a status; a step that is not ``ok``
(contacts solved), that one, or ``free`` (no active contact) ends the rollout with what it has: a non-finite state, a body through the ground
(a gap below FALL_DEPTH), a controller torque that is not finite or beyond ``tau_limit``,
a solve that did not converge (its own status and residual are kept).
"""
from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any
from dataclasses import dataclass, field

import casadi as ca
import numpy as np
import numpy.typing as npt

from ..codegen.precision import check as check_precision
from ..constraints import ConstraintSet
from ..errors import InputError
from ..model import Robot, RobotLike
from ..model.integrate import integrate_sx
from ..progress import counted, silenced
from ..runtime.inputs import real_array, unit_q
from ..symbolic.frames import joint_transform
from ..contact.candidates import Candidate, candidate_list, parse_candidate
from .feedback import LinearFeedback, pd_controller  # noqa: F401  (pd_controller: here too, as before)
from ..contact.result import CONVERGED, STATUS, Options, StepResult
from ..contact.step import contact_frames

FALL_DEPTH = -1.0          # a gap below this (m) is a body through the ground, not a contact
# Default activation margin (m): a resting contact's gap rounds to ±1e-16 and must stay active
MARGIN = 1e-6
OK, FREE, COLD = "ok", "free", "ok after a cold start"
NAN_STATE, FELL, CONTROLLER, NOT_CONVERGED = "nan state", "fell through", "controller diverged", "not converged"
INTERRUPTED = "interrupted"         # Ctrl-C during a C rollout (runtime/contact_rollout.py): what was computed is kept
STOPPING = (NAN_STATE, FELL, CONTROLLER, NOT_CONVERGED, INTERRUPTED)
ROLLOUT_STATUSES = (OK, FREE, COLD, *STOPPING)      # by the codes of the C rollout (codegen/templates/contact_rollout.c.j2)
# Baumgarte's β by default: a landing's penetration d⁻ closes by this fraction a step (0.5 mm to 1e-6 m in ~60 steps);
# the outward velocity it asks, β |d⁻| / dt ≤ β |v at impact|, is a restitution of at most β, and a hop only where
# β² |d⁻| / dt exceeds gravity's g dt (|d⁻| > 1 mm at dt = 1 ms for β = 0.1); docs/simulate.md has the measurements.
BAUMGARTE = 0.1
# What one rollout call may ask for, refused before anything is allocated: steps, and the bytes of the records of every
# environment (states, torques, gaps, forces, iterations, residuals, statuses; record_bytes): 16 GiB, or half the
# machine's memory where that is less (max_record_bytes)
MAX_STEPS = 10_000_000
MAX_RECORD_BYTES = 16 * 2 ** 30


def max_record_bytes():
    """The bytes a rollout's records may take here: MAX_RECORD_BYTES, or half the physical memory if less."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):       # not POSIX: the constant alone
        return MAX_RECORD_BYTES
    return min(MAX_RECORD_BYTES, memory // 2)


# -- the scene -------------------------------------------------------------------------------
UNIT_TOL = 1e-9        # |‖normal‖ − 1| allowed for the ground normal (the compiled step's normals: the same)


def _unit(normal):
    """The ground normal: three finite numbers of norm 1 (to UNIT_TOL), refused otherwise (a normal that is not unit
    is more likely a mistake than a direction to normalise: its height and gaps would be scaled by its norm)."""
    try:
        n = np.asarray(normal, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        n = np.zeros(0)
    if n.shape != (3,) or not np.all(np.isfinite(n)) or abs(np.linalg.norm(n) - 1) > UNIT_TOL:
        raise InputError(f"ground normal must be three finite numbers of norm 1 (to {UNIT_TOL:g}); got {normal!r}")
    return n / np.linalg.norm(n)


def _finite(name, x):
    """``x`` as a finite float (a ground height, a margin), or an InputError."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        f = np.nan
    if not np.isfinite(f):
        raise InputError(f"{name} must be a finite number, got {x!r}")
    return f


def _friction(mu, k):
    """μ as k values (one number for every candidate, or one per candidate), finite and ≥ 0."""
    try:
        a = np.asarray(mu, dtype=float)
    except (TypeError, ValueError):
        a = np.full(1, np.nan)
    if a.shape not in ((), (1,), (k,)):
        raise InputError(f"friction μ: one number or {k} (one per candidate), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise InputError(f"friction μ must be finite and ≥ 0 for every candidate; got {mu!r}")
    return np.broadcast_to(a, (k,)).copy()


@dataclass
class Scene:
    """A robot, its contact candidates and the ground {x : normal·x ≥ height}; friction ``mu``
    (one value or one per candidate); a candidate is active when its gap ≤ ``margin``."""
    robot: Robot
    candidates: list
    normal: npt.ArrayLike = field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    height: float = 0.0
    mu: object = 0.8
    margin: float = MARGIN

    def __post_init__(self):
        self.candidates = [c if isinstance(c, Candidate) else parse_candidate(self.robot, c) for c in self.candidates]
        if not self.candidates:
            raise InputError("no contact candidates given (e.g. FL_foot@0,0,-0.02): nothing can touch the ground")
        self.normal = _unit(self.normal)
        self.height, self.margin = _finite("ground height", self.height), _finite("activation margin", self.margin)
        self.mu = _friction(self.mu, len(self.candidates))
        self._positions = candidate_positions(self.robot, tuple((c.body, tuple(c.point)) for c in self.candidates))
        self._advance, self._mapped = self._advance_function(), {}

    def _advance_function(self):
        """casadi.Function (q, δ) -> (q ⊕ δ, gaps at q ⊕ δ): the loop's one kinematic call a step."""
        q, d = ca.SX.sym("q", self.robot.nq), ca.SX.sym("delta", self.robot.nv)
        qp = integrate_sx(self.robot, q, d)
        radii = ca.DM([c.radius for c in self.candidates]).T
        gaps = ca.mtimes(ca.DM(self.normal).T, self._positions(qp)) - self.height - radii
        return ca.Function("advance", [q, d], [qp, gaps])

    def advance(self, q, delta):
        """(q ⊕ δ, the candidates' gaps there), numpy; for a batch (N x nq, N x nv) both come
        back with the batch first."""
        if np.ndim(q) == 2:
            f = self._mapped.setdefault(len(q), self._advance.map(len(q)))
            qp, gaps = f(np.asarray(q).T, np.asarray(delta).T)
            return np.asarray(qp).T, np.asarray(gaps).reshape(len(q), -1)      # map puts the 1 x k rows side by side
        qp, gaps = self._advance(q, delta)
        return np.asarray(qp).reshape(-1), np.asarray(gaps).reshape(-1)

    @property
    def frame(self):
        """[t₁, t₂, n] (columns) of the contact frame, the compiled step's (step.contact_frames)."""
        if self.normal.tolist() == [0.0, 0.0, 1.0]:     # contact_frames's own I, without its NumPy calls (30 µs of
            return np.eye(3)                            # a 1,000-step rollout's 2.3 ms asks it once a call)
        return contact_frames(self.normal)[0].T

    def positions(self, q):
        """World positions (k x 3) of the candidates' points (sphere centres) at q."""
        return np.asarray(self._positions(q)).reshape(3, -1).T

    def gaps(self, q):
        """Signed distances (k,) of the candidates to the ground at q (spheres: to their surface)."""
        return self.positions(q) @ self.normal - self.height - np.array([c.radius for c in self.candidates])

    @property
    def bodies(self):
        """The body (index) each candidate is fixed on, in order."""
        return np.array([c.body for c in self.candidates])

    def friction_points(self, q0):
        """Each candidate's friction point in body coordinates: its point, or a sphere's lowest
        point toward the ground at q0, fixed to the body from then on."""
        if not any(c.radius for c in self.candidates):        # points: no rotation to trace (a rollout asks each run)
            return [c.point for c in self.candidates]
        R = sphere_rotations(self.robot, q0, [c.body for c in self.candidates])
        return [c.point - c.radius * (R_i.T @ self.normal) for c, R_i in zip(self.candidates, R)]

    def specs(self, q0):
        """The constraint specs (world-aligned points, offsets in the link's frame) of every
        candidate, in order."""
        out = []
        for c, p in zip(self.candidates, self.friction_points(q0)):
            f = self.robot.frame(c.link)
            out.append(f"{c.link}:3d-world@{','.join(repr(float(x)) for x in f.rotation.T @ (p - f.translation))}")
        return out


def _world_transforms(robot, q, bodies):
    """{body: ^bX_0} (spatial.Transform) for ``bodies`` and their ancestors, each product once."""
    out = {}
    for i in sorted({a for b in bodies for a in robot.ancestors(b)}):      # parents precede children
        X = joint_transform(robot.bodies[i], q)
        out[i] = X if robot.parent(i) < 0 else X @ out[robot.parent(i)]
    return out


@functools.lru_cache(maxsize=16)
def candidate_positions(robot, points):
    """casadi.Function q -> 3 x k world positions of ``points`` ((body, (x, y, z)) pairs)."""
    q = ca.SX.sym("q", robot.nq)
    X = _world_transforms(robot, q, [b for b, _ in points])
    cols = [X[b].r + ca.mtimes(X[b].E.T, ca.DM(p)) for b, p in points]
    return ca.Function("candidate_positions", [q], [ca.horzcat(*cols)])


def sphere_rotations(robot, q, bodies):
    """The world rotations (body to world, numpy 3 x 3) of ``bodies`` at q."""
    qs = ca.SX.sym("q", robot.nq)
    X = _world_transforms(robot, qs, bodies)
    f = ca.Function("rotations", [qs], [ca.vertcat(*[X[b].E.T for b in bodies])])
    return np.asarray(f(np.asarray(q, dtype=float))).reshape(len(bodies), 3, 3)


# -- steps -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def free_step(robot):
    """The step without contacts: v⁺ = v + dt ABA(q, v, τ) (the compiled ABA's SX, evaluated)."""
    from ..codegen.trace import trace
    aba = trace(robot, ConstraintSet(robot, [], allow_empty=True), "aba", cse=True)[0]

    def step(q, v, tau, dt, lam0=None, gap=None, active=None):
        return StepResult(np.zeros(0), np.zeros(0), v + dt * np.asarray(aba(q, v, tau)).reshape(-1), 0, 0.0,
                          STATUS[CONVERGED])
    return step


# What the compiled step's build takes from simulate's **build_options, the per-step step (contact_step) and the C
# rollout (stepping/rollout.py CompiledRollout) alike: each one works on both routes
BUILD_OPTIONS = ("out_dir", "cflags", "cc", "delassus", "name", "linear_solve", "relaxed", "precision")
# what the C rollout of a linear feedback takes alone (issue 33: single precision), not the per-step loop's step
ROLLOUT_ONLY = ("precision",)


def compiled_steps(solver="admm", tol=Options.tol, max_iter=Options.max_iter, **build_options):
    """A step factory on the compiled step (issue 25, step.py): ``factory(robot, specs, mu, frame)`` returns
    ``step(q, v, τ, dt, lam0, gap, active)`` over every candidate of ``specs`` (lam0: 3 per candidate, gap: one per
    candidate, active: the mask of those that take part), built once per robot, specs, μ and frame and kept by the
    factory, so rollouts that reuse it never build again; ``build_options`` (BUILD_OPTIONS) go to ``contact_step``
    and to the C rollout of a linear feedback alike.  tol, max_iter and the options' names are checked here, before
    any build."""
    Options(tol=tol, max_iter=max_iter)
    unknown = sorted(set(build_options) - set(BUILD_OPTIONS))
    if unknown:
        raise InputError(f"unknown build option(s) {', '.join(map(repr, unknown))} of the compiled step (known: "
                         f"{', '.join(BUILD_OPTIONS)})")
    built = {}

    def factory(robot, specs, mu, frame):
        key = (robot, tuple(specs), np.asarray(mu, dtype=float).tobytes(), np.asarray(frame, dtype=float).tobytes())
        if key not in built:
            built[key] = _compiled_step(robot, specs, mu, frame, solver, tol, max_iter, build_options)
        return built[key]
    from ..contact.step import check_contacts
    factory.check = check_contacts        # refuses what the step cannot take before the first step
    factory.rollout = _rollout_builder(solver, tol, max_iter, build_options)
    factory.precision = check_precision(build_options.get("precision", "double"))
    return factory


def _compiled_step(robot, specs, mu, frame, solver, tol, max_iter, build_options):
    """compiled_steps's step (and its ``batch``) for every candidate of ``specs``: one contact_step build."""
    from ..stepping.contact import contact_step
    s = contact_step(robot, specs, solver=solver, mu=mu, **{k: v for k, v in build_options.items() if k not in ROLLOUT_ONLY})
    normals = step_normals(frame, len(specs))

    def step(q, v, tau, dt, lam0=None, gap=None, active=None):
        return s(q, v, tau, dt=dt, lam0=lam0, tol=tol, max_iter=max_iter, normals=normals,
                 gap=None if gap is None else gap / dt, active=active)

    def batch(Q, V, TAU, dt, LAM0, threads=1, GAP=None, ACTIVE=None):
        """N steps at once (the step's batch entry point, ``threads`` POSIX threads; ACTIVE: a mask per state)."""
        r = s(Q, V, TAU, dt=dt, lam0=LAM0, tol=tol, max_iter=max_iter, normals=normals, threads=threads,
              gap=None if GAP is None else GAP / dt, active=ACTIVE)
        return r.v_next, r.lam, np.asarray(r.iterations), np.max(r.residuals, axis=1), list(r.status)
    step.batch = batch
    return step


def step_normals(frame, k):
    """The normals to give a compiled step of k contacts for the contact frame ``frame``: None for +z (the step's
    default; giving it costs a check per call)."""
    if np.asarray(frame).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]:    # before allclose's 17 µs
        return None
    return None if np.allclose(frame, np.eye(3)) else np.tile(frame[:, 2], (k, 1))


def _rollout_builder(solver, tol, max_iter, build_options):
    """``rollout(scene, q0, lanes=1, measured_on=None)``: the scene's compiled rollout (stepping/rollout.py) for a
    linear feedback, built once per robot, friction points, candidate positions and ``lanes`` (1, "auto" or a power of
    two: SIMD lane groups, issue 33); a single-precision one measures its error at build on ``measured_on``
    (measured_on())."""
    built = {}

    def rollout(scene, q0, lanes=1, measured_on=None):
        from ..stepping.rollout import CompiledRollout
        key = (scene.robot, tuple(scene.specs(q0)), scene._positions, lanes)
        if key not in built:
            built[key] = CompiledRollout(scene.robot, key[1], scene._positions, solver, tol, max_iter, lanes=lanes,
                                         measured_on=measured_on, **build_options)
        return built[key]
    return rollout


def measured_on(scene, Q0, V0, dt, feedback, tau_limit, baumgarte):
    """What a single-precision C rollout built for this call measures its error on (stepping/rollout.py MeasuredOn):
    its first ROLLOUT_ENVIRONMENTS environments (verify/precision.py) for ROLLOUT_STEPS steps of ``dt``, one environment
    per thread (lanes=1)."""
    from ..stepping.rollout import MeasuredOn
    from ..verify.precision import ROLLOUT_ENVIRONMENTS, ROLLOUT_STEPS
    Q, V = Q0[:ROLLOUT_ENVIRONMENTS], V0[:ROLLOUT_ENVIRONMENTS]
    return MeasuredOn(lambda compiled: c_rollouts(scene, compiled, Q, V, ROLLOUT_STEPS, dt, feedback, tau_limit,
                                                  baumgarte=baumgarte, lanes=1), ROLLOUT_STEPS, dt)


def per_step_precision(factory):
    """An InputError when ``factory`` builds single precision, which the C rollout of a linear feedback alone computes
    (the per-step loop's step is double)."""
    if getattr(factory, "precision", "double") != "double":
        raise InputError(f"precision={factory.precision!r} runs the C rollout only: give a LinearFeedback "
                         "(cd.pd_controller) on the compiled step")


def c_rollouts(scene, compiled, Q0, V0, n, dt, feedback, tau_limit, threads=None, baumgarte=0.0, lanes=None):
    """The RawRollouts of ``compiled`` (a CompiledRollout of ``scene``) from each row of (Q0, V0) for n steps
    (``lanes``: LoadedRollout's)."""
    return compiled(Q0, V0, n, dt, feedback, scene.normal, scene.height, [c.radius for c in scene.candidates], scene.mu,
                    scene.margin, tau_limit, FALL_DEPTH, step_normals(scene.frame, len(scene.candidates)), threads,
                    baumgarte, lanes)


def candidate_step(scene, factory, q0):
    """The step of every candidate of ``scene`` (friction points at q0) from ``factory``, which checks the specs
    first where it can (``factory.check``): the one step a rollout builds, the active set a mask of each call."""
    specs = scene.specs(q0)
    if hasattr(factory, "check"):
        factory.check(scene.robot, specs)
    return factory(scene.robot, specs, scene.mu, scene.frame)


def place(scene, q, clearance):
    """q with its free base moved along the ground normal so that the lowest candidate's gap is
    ``clearance`` (0: touching; > 0: a drop from that height)."""
    b = next((b for b in scene.robot.bodies if b.joint.kind == "free"), None)
    if b is None:
        raise InputError(f"robot {scene.robot.name!r} has no free base to place above the ground")
    clearance = _finite("the clearance (drop height)", clearance)
    q = numbers("q", q)
    q[b.q_index:b.q_index + 3] += (clearance - scene.gaps(q).min()) * scene.normal
    return q


def place_robot(robot: RobotLike, contacts: str | Sequence[str], q: npt.ArrayLike, clearance: float = 0.0,
                normal: npt.ArrayLike = (0.0, 0.0, 1.0), height: float = 0.0) -> np.ndarray:
    """``cd.place``: q with ``robot``'s free base moved along the ground normal so that the lowest of ``contacts``
    (candidates ``LINK[@x,y,z][/r]``, contact/candidates.py, or a scenario name) is ``clearance`` above the ground
    {x : normal·x ≥ height}; the joints and the base's orientation are kept."""
    from ..model import load_robot
    robot = load_robot(robot)
    return place(Scene(robot, candidate_list(robot, contacts), normal, height), q, clearance)


# -- the rollout -----------------------------------------------------------------------------
@dataclass
class Trajectory:
    """What a rollout records, per step: states q, v (one more than the steps), torques τ, the
    candidates' gaps and contact forces λ/dt ([t₁, t₂, n] of the contact frame), solver
    iterations and residuals, statuses."""
    scene: Scene
    dt: float
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    gaps: np.ndarray
    forces: np.ndarray
    iterations: np.ndarray
    residuals: np.ndarray
    statuses: list


@dataclass
class Rollout(Trajectory):
    """One trajectory: q (n+1 x nq), v (n+1 x nv), τ (n x nv), gaps (n x k), forces
    (n x k x 3), iterations and residuals (n), a status per step, and the final status."""

    @property
    def t(self) -> np.ndarray:
        """The time at the start of each step (n)."""
        return self.dt * np.arange(len(self.statuses))

    @property
    def status(self) -> str:
        """The last step's status: "ok" or "free" for a rollout that ran to the end."""
        return self.statuses[-1] if self.statuses else OK

    @property
    def completed(self) -> bool:
        """Whether the rollout ran to the end (no stopping status)."""
        return self.status not in STOPPING

    def base_height(self) -> np.ndarray | None:
        """The free base's height along the ground normal (the first free joint's position)."""
        b = next((b for b in self.scene.robot.bodies if b.joint.kind == "free"), None)
        return None if b is None else self.q[:, b.q_index:b.q_index + 3] @ self.scene.normal


class _Recorder:
    """Lists that become a Rollout."""

    def __init__(self, q0, v0):
        self.q, self.v, self.tau, self.gaps, self.forces, self.its, self.res, self.statuses = [q0], [v0], [], [], [], [], [], []

    def add(self, status, tau, gaps, forces, its=0, res=0.0):
        """One step's record."""
        self.statuses.append(status)
        self.tau.append(tau)
        self.gaps.append(gaps)
        self.forces.append(forces)
        self.its.append(its)
        self.res.append(res)

    def state(self, q, v):
        """The state a step reached."""
        self.q.append(q)
        self.v.append(v)

    def rollout(self, scene, dt):
        n, k = len(self.statuses), len(scene.candidates)
        return Rollout(scene, dt, np.array(self.q), np.array(self.v),
                       np.array(self.tau).reshape(n, -1), np.array(self.gaps).reshape(n, k),
                       np.array(self.forces).reshape(n, k, 3), np.array(self.its), np.array(self.res), self.statuses)


def gap_term(baumgarte, gaps, bodies, active=None):
    """β d⁻ (m) for each contact (``gaps``: its gap, or N × k of them; ``bodies``: its body), d⁻ the deepest
    penetration min(d, 0) among its body's active contacts (``active``: the mask, one per row for N × k; None: every
    contact given): what the step adds over dt to g's normal rows; None without Baumgarte (β = 0).  One push per body because two points of a rigid body can stick only if their velocities
    differ orthogonally to their offset, and pushes proportional to each point's own depth differ along it on any
    tilted body: such a solve has no sticking answer and ADMM crawls after a µm/s slide (a toppling G1 and a tilted
    box landing stopped "not converged"); a normal translation of the body is a motion sticking allows."""
    if not baumgarte:
        return None
    bodies = np.asarray(bodies)
    same = bodies[:, None] == bodies[None, :]
    depth = np.minimum(gaps, 0.0) if active is None else np.where(active, np.minimum(gaps, 0.0), 0.0)
    return baumgarte * np.min(np.where(same, depth[..., None, :], 0.0), axis=-1, initial=0.0)


def _check(q, v, gaps, tau, tau_limit):
    """The stopping status of a step about to be taken, or None."""
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        return NAN_STATE
    if np.any(gaps < FALL_DEPTH):
        return FELL
    if not np.all(np.isfinite(tau)) or np.max(np.abs(tau), initial=0.0) > tau_limit:
        return CONTROLLER
    return None


def numbers(name, x):
    """``x`` (an initial state, a batch of them) as a new float array, by the runtime's rule (runtime/inputs.py
    real_array: masked arrays, complex numbers, strings and ragged lists refused)."""
    return np.array(real_array(name, x))


def _inputs(scene, q0, v0, T, dt):
    robot = scene.robot
    q0, v0 = numbers("q0", q0).reshape(-1), numbers("v0", v0).reshape(-1)
    if q0.shape != (robot.nq,) or v0.shape != (robot.nv,):
        raise InputError(f"q0 must have {robot.nq} entries and v0 {robot.nv}; got {q0.size} and {v0.size}")
    return unit_q0(robot, q0), v0, step_count(T, dt, record_bytes(scene))


def unit_q0(robot, Q0):
    """q0 (or the rows of Q0) with its quaternions and (cos, sin) pairs checked by the one rule of every q
    (runtime/inputs.unit_q); a row that is not finite is left for the rollout's "nan state" status."""
    Q0 = np.array(Q0, dtype=float)
    finite = np.all(np.isfinite(Q0), axis=-1)
    if Q0.ndim == 1:
        return unit_q(Q0, robot.q_layout()) if finite else Q0
    Q0[finite] = unit_q(Q0[finite], robot.q_layout(), "Q0's finite rows")
    return Q0


def record_bytes(scene):
    """Bytes a rollout records per step and environment: the state (nq + nv), τ (nv), gaps and forces (4 per
    candidate), iterations, residual and status (8 each)."""
    r = scene.robot
    return 8 * (r.nq + 2 * r.nv + 4 * len(scene.candidates) + 3)


def step_count(T, dt, per_step=0, environments=1):
    """The number of steps of ``dt`` in ``T`` seconds: dt > 0 and T finite, at least one step and at most MAX_STEPS,
    and the records of ``environments`` at ``per_step`` bytes a step within max_record_bytes(); refused otherwise,
    before anything is allocated."""
    T, dt = _finite("T (the duration)", T), _finite("dt", dt)
    if not dt > 0:
        raise InputError(f"dt must be > 0 (finite); got dt = {dt!r}")
    steps = T / dt
    if not steps >= 0.5:
        raise InputError(f"T = {T!r} s is less than half a step of dt = {dt!r} s: no step to take")
    if steps > MAX_STEPS:
        raise InputError(f"T / dt = {steps:.3g} steps, more than the {MAX_STEPS:,} one rollout takes "
                         f"(T = {T!r} s, dt = {dt!r} s): a longer dt, or T in parts")
    n = int(round(steps))
    size, most = environments * (n + 1) * per_step, max_record_bytes()
    if size > most:
        raise InputError(f"the records of {environments:,} environment(s) × {n:,} steps would take {size / 2 ** 30:.1f} "
                         f"GiB, more than the {most / 2 ** 30:.1f} GiB a rollout may allocate here (16 GiB, or half the "
                         f"memory): fewer steps or environments")
    return n


def check_settings(baumgarte, tau_limit):
    """β in [0, 1] and a torque limit > 0 (inf: none), or an InputError (a NaN limit would pass every torque)."""
    b, t = _finite("baumgarte", baumgarte), float(tau_limit) if isinstance(tau_limit, (int, float, np.number)) else -1
    if not 0 <= b <= 1:
        raise InputError(f"baumgarte β must be in [0, 1] (the fraction of a penetration closed per step), got {baumgarte!r}")
    if not t > 0:
        raise InputError(f"tau_limit must be a number > 0 (inf: no limit), got {tau_limit!r}")
    return b, t


def simulate(robot: RobotLike, contacts: str | Sequence[str], q0: npt.ArrayLike, v0: npt.ArrayLike, T: float, dt: float,
             controller: Callable[[float, np.ndarray, np.ndarray], npt.ArrayLike] | None = None,
             normal: npt.ArrayLike = (0.0, 0.0, 1.0), height: float = 0.0, mu: float | npt.ArrayLike = 0.8,
             margin: float = MARGIN, solver: str = "auto", step: str = "compiled", baumgarte: float = BAUMGARTE,
             tau_limit: float = 1e6, tol: float = Options.tol, max_iter: int = Options.max_iter, quiet: bool = False,
             **build_options: Any) -> Rollout:
    """Roll ``robot`` (a Robot or a name) out from (q0, v0) for T seconds of steps dt, its
    ``contacts`` (candidates ``LINK[@x,y,z][/r]``, contact/candidates.py, or a scenario name) against the ground {x : normal·x ≥
    height}, under ``controller(t, q, v) -> τ`` (zero torque when None).  ``step``: "compiled"
    (issue 25's compiled step) or "reference" (the NumPy step), solved by ``solver`` ("admm" |
    "pgs" | "auto": per active set, step.auto_solver) to ``tol``; ``baumgarte`` β of the gap term (0: none);
    ``build_options`` (out_dir, cflags, …) go to the compiled step's build; ``quiet=True``: no progress on stderr.
    Returns a Rollout that stops at the first stopping status."""
    from ..model import load_robot
    robot = load_robot(robot)
    scene = Scene(robot, candidate_list(robot, contacts), normal, height, mu, margin)
    with silenced(quiet):
        return run(scene, q0, v0, T, dt, controller, factory(step, solver, tol, max_iter, **build_options), baumgarte,
                   tau_limit)


def factory(step, solver="admm", tol=Options.tol, max_iter=Options.max_iter, **build_options):
    """The step factory by name: "compiled" (issue 25's step, built with ``build_options``)
    or "reference" (NumPy)."""
    if step not in ("compiled", "reference"):
        raise InputError(f"step must be 'compiled' or 'reference', not {step!r}")
    Options(tol=tol, max_iter=max_iter)      # tol and max_iter refused here, before the first build
    if step == "reference":
        from .reference_step import reference_steps
        if build_options:
            raise InputError(f"the reference step is not built: {', '.join(build_options)} apply to step='compiled'")
        return reference_steps(solver, tol=tol, max_iter=max_iter)
    return compiled_steps(solver, tol=tol, max_iter=max_iter, **build_options)


def _rollout(scene, dt, raw, e=0):
    """Environment ``e`` of RawRollouts as a Rollout."""
    n = int(raw.count[e])
    statuses = [ROLLOUT_STATUSES[s] for s in raw.STATUS[:n, e].tolist()]      # Python ints: a quarter of the time
    states = n + 1 if n == 0 or statuses[-1] not in STOPPING else n
    return Rollout(scene, dt, raw.Q[:states, e], raw.V[:states, e], raw.TAU[:n, e], raw.GAPS[:n, e], raw.FORCES[:n, e],
                   raw.ITS[:n, e].astype(int), raw.RES[:n, e], statuses)


def run(scene, q0, v0, T, dt, controller=None, step_factory=None, baumgarte=BAUMGARTE, tau_limit=1e6):
    """Roll ``scene`` out from (q0, v0) for T seconds of steps dt under ``controller`` (t, q, v)
    -> τ, on the step of every candidate from ``step_factory`` (built once: candidate_step; each call masked by the
    active set), with Baumgarte's gap term β = ``baumgarte``; returns a Rollout that stops at the first stopping
    status.  With a LinearFeedback controller on the compiled step the whole rollout is one C call
    (codegen/contact_rollout.py); other controllers run this loop, one step call per step."""
    robot = scene.robot
    q, v, n = _inputs(scene, q0, v0, T, dt)
    baumgarte, tau_limit = check_settings(baumgarte, tau_limit)
    factory = step_factory or compiled_steps()
    if isinstance(controller, LinearFeedback) and hasattr(factory, "rollout"):
        built = factory.rollout(scene, q, measured_on=measured_on(scene, q[None], v[None], dt, controller, tau_limit,
                                                                   baumgarte))
        return _rollout(scene, dt, c_rollouts(scene, built, q[None], v[None], n, dt, controller, tau_limit,
                                              baumgarte=baumgarte))
    per_step_precision(factory)
    step, free = candidate_step(scene, factory, q), free_step(robot)
    warm, rec, gaps = np.zeros((len(scene.candidates), 3)), _Recorder(q, v), scene.gaps(q)
    for k in counted(n, "steps"):
        tau = np.zeros(robot.nv) if controller is None else np.asarray(controller(k * dt, q, v), dtype=float).reshape(-1)
        stop = _check(q, v, gaps, tau, tau_limit)
        active = gaps <= scene.margin
        cold = False
        if stop is None:
            call, gap = step if active.any() else free, gap_term(baumgarte, gaps, scene.bodies, active)
            r = call(q, v, tau, dt, lam0=warm.reshape(-1), gap=gap, active=active)
            if r.status != "converged" and warm[active].any():     # a warm start may be what failed
                cold, r = True, call(q, v, tau, dt, lam0=np.zeros(warm.size), gap=gap, active=active)
            stop = NOT_CONVERGED if r.status != "converged" else None
        forces = np.zeros_like(warm)
        if stop is not None:
            rec.add(stop, tau, gaps, forces, *((r.iterations, r.residual) if stop == NOT_CONVERGED else ()))
            break
        if active.any():
            forces[active] = r.lam.reshape(-1, 3)[active] / dt
        warm = forces * dt
        v = r.v_next
        rec.add(COLD if cold else OK if active.any() else FREE, tau, gaps, forces, r.iterations, r.residual)
        q, gaps = scene.advance(q, dt * v)
        rec.state(q, v)
    return rec.rollout(scene, dt)
