"""The contact step in NumPy, an oracle for the compiled one and the loop's fallback.

Issue 25's velocity-level step (Pinocchio 4's convention; Carpentier et al. 2024, "From
compliant to rigid contact simulation: a unified and efficient approach", RSS, Sec. III) from
the independent NumPy reference (verify/reference.py: CRBA, dense Jacobians, dense solves):

    v_free = v + dt M⁻¹ (τ − c(q, v))
    J      = diag(Cᵀ, …) J_world          rows [t₁, t₂, n] of the contact frame C = [t₁ t₂ n]
    G      = J M⁻¹ Jᵀ,   g = J v_free + b/dt on the normal rows (b: the loop's Baumgarte term)
    λ      = the frictional solve of (G, g, μ)  (contact/admm.py or contact/pgs.py) on the active
             candidates A alone (G[A, A], g[A]), every other λ exactly 0: the compiled step's mask
    v⁺     = v_free + M⁻¹ Jᵀ λ
"""
from __future__ import annotations

import numpy as np

from ..constraints import ConstraintSet
from ..verify import reference
from ..contact.result import Options, StepResult


def reference_steps(solver="admm", exact=True, tol=Options.tol, max_iter=Options.max_iter):
    """A step factory (simulate.py candidate_step) of NumPy steps over every candidate of ``specs``, solved by
    ``solver`` ("admm" | "pgs" | "auto": step.auto_solver's pick for each active set).  A step takes the active set
    as the compiled step does (``active``, a flag per candidate; None: all): the solve on G[A, A] and g[A], every
    other candidate's λ and σ exactly 0."""
    from ..contact import SOLVERS, pgs_then_admm
    from ..contact.step import auto_solver
    options = Options(tol=tol, max_iter=max_iter)
    auto = {"admm": SOLVERS["admm"], "pgs": pgs_then_admm}      # auto's PGS hands what it cannot finish to ADMM

    def factory(robot, specs, mu, frame):
        cs = ConstraintSet.parse(robot, specs)
        turn, mu = np.kron(np.eye(len(specs)), frame.T), np.broadcast_to(np.asarray(mu, dtype=float), (len(specs),))

        def step(q, v, tau, dt, lam0=None, gap=None, active=None):
            A = np.ones(len(specs), dtype=bool) if active is None else np.asarray(active, dtype=bool)
            rows = np.repeat(A, 3)
            solve = auto[auto_solver(cs, A)] if solver == "auto" else SOLVERS[solver]
            M = reference.mass_matrix(robot, q)
            v_free = v + dt * np.linalg.solve(M, tau - reference.bias_forces(robot, q, v))
            J = (turn @ reference.constraint_jacobian(robot, cs, q))[rows]
            MiJt = np.linalg.solve(M, J.T)
            g = J @ v_free
            if gap is not None:
                g[2::3] += np.asarray(gap)[A] / dt
            r = solve(J @ MiJt, g, mu[A], exact=exact, lam0=None if lam0 is None else np.asarray(lam0)[rows],
                      options=options)
            v_next = v_free + MiJt @ r.lam
            lam, sigma = np.zeros(3 * len(specs)), np.zeros(3 * len(specs))
            lam[rows], sigma[rows] = r.lam, J @ v_next
            return StepResult(lam, sigma, v_next, r.iterations, r.residuals, r.status)
        return step
    return factory
