"""The whole rollout's mathematics (issue 27; its C: codegen/contact_rollout.py, loaded by
runtime/contact_rollout.py): ``<name>_rollout`` runs steps of the loop of simulation/simulate.py under a fixed linear feedback (simulation/feedback.py), and ``<name>_rollout_batch`` N of them on the threads of runtime/pool.h,
which Python calls in parts of PART_WORK environment-steps, and at least PROGRESS_PARTS parts for the progress bar
(progress.py; the warm start carried between parts, so that the parts are one rollout bit for bit).

One build serves every active set: the contact step (step.py; codegen/templates/contact_step.c.j2) is generated for all the
candidates, and a step with active set A solves on G[A, A] and g[A].  Since G = J M⁻¹ Jᵀ, the rows and columns of A
of G are J_A M⁻¹ J_Aᵀ, the active set's own Delassus matrix, and g[A] = J_A v_free; the step's ``keep_active``
replaces the other rows and columns by a decoupled block so that their impulses stay exactly 0 and the solver's
iterates on A are those of the solve on G[A, A].  It is the one active-set mechanism: simulate.py's per-step loop hands
the same mask to the same compiled step (its ``active`` argument; tests/stepping/test_rollout.py redoes the rollout's
steps with it bit for bit).  No set ever needs a build (2^k sets for k candidates), at the cost of the full candidate
set's Delassus matrix every step.

Per step, as simulate.py's loop: the candidates' signed distances from their world positions (the SX of
simulate.candidate_positions, generated), the stopping checks (non-finite state, a gap below the fall depth, a torque
not finite or beyond the limit), the active set (gap ≤ margin), the solve warm-started from the previous impulses of
the same contacts (retried from 0 when the warm start fails), and q ⊕ dt v⁺ by the model's integrate (generated).
A step with no active contact is v + dt ABA(q, v, τ) alone, as in the per-step loop.
The C writes step-first arrays and status codes (RawRollouts); simulation/simulate.py and simulate_batch.py make them a Rollout
and a BatchRollout.  Baumgarte's gap term and continuous joints' wrapped angle errors are those of the per-step loop.

The loop's own SX is here (loop_functions); the step's is contact/step.py's."""
from __future__ import annotations

import casadi as ca

from ..model.integrate import integrate_sx


def loop_functions(robot, positions, name, aba):
    """(integrate, positions, free): ``<name>_integrate(q, δ)`` → q ⊕ δ, ``<name>_positions(q)`` → the candidates'
    world positions (3k, candidate after candidate) from ``positions`` (casadi.Function q → 3 x k), and
    ``<name>_free(q, v, τ, dt)`` → v + dt ABA(q, v, τ), the step with no active contact (simulate.free_step's ABA),
    ``aba`` the traced ABA (casadi.Function (q, v, τ) → v̇: codegen/contact_rollout.py traces it)."""
    q, d, v, tau, dt = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("delta", robot.nv), ("v", robot.nv),
                                                      ("tau", robot.nv), ("dt", 1)))
    return (ca.Function(f"{name}_integrate", [q, d], [ca.densify(integrate_sx(robot, q, d))], ["q", "delta"], ["q_next"]),
            ca.Function(f"{name}_positions", [q], [ca.densify(ca.reshape(positions(q), -1, 1))], ["q"], ["p"]),
            ca.Function(f"{name}_free", [q, v, tau, dt], [ca.densify(v + dt * aba(q, v, tau))], ["q", "v", "tau", "dt"],
                        ["v_next"]))
