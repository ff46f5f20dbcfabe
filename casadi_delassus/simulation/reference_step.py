"""The contact step in NumPy, an oracle for the compiled one and the loop's fallback.

Issue 25's velocity-level step (Pinocchio 4's convention; Carpentier et al. 2024, "From
compliant to rigid contact simulation: a unified and efficient approach", RSS, Sec. III) from
the independent NumPy reference (verify/reference.py: CRBA, dense Jacobians, dense solves):

    v_free = v + dt M⁻¹ (τ − c(q, v))
    J      = diag(Cᵀ, …) J_world          rows [t₁, t₂, n] of the contact frame C = [t₁ t₂ n]
    G      = J M⁻¹ Jᵀ,   g = J v_free + b/dt on the normal rows (b: the loop's Baumgarte term)
    λ      = the frictional solve of (G, g, μ)  (contact/admm.py or contact/pgs.py)
    v⁺     = v_free + M⁻¹ Jᵀ λ
"""
from __future__ import annotations

import numpy as np

from ..constraints import ConstraintSet
from ..verify import reference
from ..contact.result import Options, StepResult


def reference_steps(solver="admm", exact=True, tol=Options.tol, max_iter=Options.max_iter):
    """A step factory (simulate.StepCache) of NumPy steps solved by ``solver`` ("admm" | "pgs" |
    "auto": step.auto_solver's pick for each active set)."""
    from ..contact import SOLVERS, pgs_then_admm
    from ..contact.step import auto_solver
    options = Options(tol=tol, max_iter=max_iter)

    def factory(robot, specs, mu, frame):
        cs = ConstraintSet.parse(robot, specs)
        auto = {"admm": SOLVERS["admm"], "pgs": pgs_then_admm}      # auto's PGS hands what it cannot finish to ADMM
        solve = auto[auto_solver(cs)] if solver == "auto" else SOLVERS[solver]
        turn = np.kron(np.eye(len(specs)), frame.T)

        def step(q, v, tau, dt, lam0=None, gap=None):
            M = reference.mass_matrix(robot, q)
            v_free = v + dt * np.linalg.solve(M, tau - reference.bias_forces(robot, q, v))
            J = turn @ reference.constraint_jacobian(robot, cs, q)
            MiJt = np.linalg.solve(M, J.T)
            g = J @ v_free
            if gap is not None:
                g[2::3] += np.asarray(gap) / dt
            r = solve(J @ MiJt, g, mu, exact=exact, lam0=lam0, options=options)
            v_next = v_free + MiJt @ r.lam
            return StepResult(r.lam, J @ v_next, v_next, r.iterations, r.residuals, r.status)
        return step
    return factory
