"""Check a compiled contact step against the NumPy path that shares no code with it: M and J
of verify/reference.py (the CRBA and Jacobians by definition), v_free by its forward dynamics,
G = J M⁻¹ Jᵀ by dense solves, then the NumPy ADMM / PGS of this package on the same G, g, μ."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..progress import counted
from ..contact import SOLVERS, pgs_then_admm
from ..contact.result import Options
from ..contact.step import contact_frames
from . import reference

LAMBDA_TOL = 1e-6      # relative to max |λ| of the reference
VELOCITY_TOL = 1e-9    # m/s, rad/s
# the matrix-free linear solve runs the reference's iteration in other arithmetic (the matrix inversion lemma, not
# G's LDLᵀ): over 150 iterations the iterates part by roundoff, 1.5e-9 on go1's random states (`casadi-delassus step
# go1 -c FL_foot:3d-world@-0.0173782,0,-0.0098993 -c RR_foot:3d-world --linear-solve matrix_free`)
VELOCITY_TOL_MATRIX_FREE = 1e-8


def reference_step(robot, contacts, q, v, tau, dt, mu, solver="admm", exact=True, normals=None, options=Options()):
    """(λ, σ, v_next, Result) of one step by the NumPy reference; ``solver``: a name of SOLVERS or a solve."""
    M = reference.mass_matrix(robot, q)
    J = reference.constraint_jacobian(robot, contacts, q)
    v_free = v + dt * reference.forward_dynamics(robot, q, v, tau)
    B = np.eye(contacts.m) if normals is None else _blocks(contact_frames(np.broadcast_to(normals, (contacts.m // 3, 3))))
    W = np.linalg.solve(M, J.T)
    r = (solver if callable(solver) else SOLVERS[solver])(B @ J @ W @ B.T, B @ J @ v_free, mu, exact=exact, options=options)
    return r.lam, r.sigma, v_free + W @ (B.T @ r.lam), r


def _blocks(R):
    """diag(R_1, …, R_n) from n 3×3 blocks."""
    out = np.zeros((3 * len(R), 3 * len(R)))
    for i, Ri in enumerate(R):
        out[3 * i:3 * i + 3, 3 * i:3 * i + 3] = Ri
    return out


@dataclass(frozen=True)
class StepCheck:
    """Worst differences over the samples between the compiled step and the NumPy reference."""
    samples: int
    lam_error: float           # max |Δλ| / max |λ_ref|
    velocity_error: float      # max |Δv_next|
    iterations: int            # most iterations the compiled solve took
    unconverged: int           # samples whose compiled solve did not converge
    pressed: int               # samples whose reference λ is not 0: the only ones that test the solve
    velocity_tol: float = VELOCITY_TOL     # allowed velocity_error (VELOCITY_TOL_MATRIX_FREE for that route)

    @property
    def passed(self):
        """Converged everywhere, within LAMBDA_TOL and velocity_tol, and at least one state pressed a contact (a
        check of separating states alone compares λ = 0 with λ = 0: it would pass with any solver)."""
        return (self.unconverged == 0 and self.pressed > 0 and self.lam_error <= LAMBDA_TOL
                and self.velocity_error <= self.velocity_tol)


def check_step(step, samples=20, seed=0, dt=1e-3, tol=Options.tol, max_iter=Options.max_iter):
    """Compare ``step`` (a ContactStep) with the reference over random states (q from the
    model's random_q, v and τ normal); ``samples`` an integer ≥ 1 (none compared would pass having checked nothing)."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise InputError(f"samples must be an integer >= 1, got {samples!r}")
    rng = np.random.default_rng(seed)
    robot, lam_err, v_err, most, bad, pressed = step.robot, 0.0, 0.0, 0, 0, 0
    for _ in counted(samples, "samples"):
        q, v, tau = robot.random_q(rng), rng.normal(scale=0.3, size=robot.nv), rng.normal(size=robot.nv)
        r = step(q, v, tau, dt=dt, tol=tol, max_iter=max_iter)
        solve = pgs_then_admm if step.fallback and step.solver == "pgs" else step.solver    # what the C step runs
        lam, _, v_next, _ = reference_step(robot, step.contacts, q, v, tau, dt, step.mu, solve, step.exact,
                                           options=Options(tol=tol, max_iter=max_iter))
        bad += not r.converged
        pressed += bool(np.any(lam != 0.0))
        most = max(most, r.iterations)
        lam_err = max(lam_err, float(np.max(np.abs(r.lam - lam)) / max(np.max(np.abs(lam)), 1e-300)))
        v_err = max(v_err, float(np.max(np.abs(r.v_next - v_next))))
    free = step.manifest.get("linear_solve") == "matrix_free"
    return StepCheck(samples, lam_err, v_err, most, bad, pressed, VELOCITY_TOL_MATRIX_FREE if free else VELOCITY_TOL)
