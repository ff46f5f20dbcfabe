"""Trajectory optimisation with Go1 standing on four 3D point contacts (registry go1, scenario
4F3): crouch, lowering the trunk by 4 cm and stopping there, with the least torque.

    .venv/bin/python examples/go1_stand_ocp.py [--knots 10] [--dt 0.05] [--dynamics symbolic|compiled]
                                               [--hessian exact|limited-memory]

Multiple shooting: states (q_k, v_k) and torques u_k (the 12 joints; the free base is not
actuated) at N knots.  The dynamics are casadi_delassus's ``pv`` (Popov-Vereshchagin constrained
dynamics) with the feet held by k = 0 (zero contact acceleration), stepped by semi-implicit
Euler on the manifold: v_{k+1} = v_k + h v̇(q_k, v_k, τ_k), q_{k+1} = q_k ⊕ h v_{k+1} with the
model's own integrate (the free base moves by the SE(3) exponential, model/integrate.py).
Cost: torque effort, velocity and posture regularisation, the trunk height against its target.
IPOPT (bundled with the casadi wheel) solves it with the exact Hessian of the Lagrangian (or,
with ``--hessian limited-memory``, its L-BFGS approximation); its iterations are printed, then
the status and the final constraint violation.

``--dynamics symbolic`` (the default) embeds ``cd.casadi_function(go1, 4F3, pv)``, the SX
function CasADi differentiates itself; ``compiled`` generates the C (``casadi_derivatives=True``:
the .so carries first and second derivatives: fwd1_/adj1_/jac_ and fwd1_adj1_ functions) and
calls it through ``casadi.external``, so IPOPT evaluates our compiled code and our compiled
derivatives, its exact Hessian included (seconds of gcc the first time).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import casadi as ca
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import casadi_delassus as cd  # noqa: E402
from casadi_delassus.model.integrate import integrate_function  # noqa: E402

# a standing posture: hips straight, thighs 0.8 rad, calves -1.6 rad, the trunk 0.29 m up
STAND = {"hip": 0.0, "thigh": 0.8, "calf": -1.6}
TRUNK_HEIGHT, DIP = 0.29, 0.04
TORQUE, SWING = 30.0, 0.5      # N m (Go1's motors: 23.7 to 35.6), rad from the standing posture


def standing_q(robot):
    q = robot.neutral_q()
    q[2] = TRUNK_HEIGHT
    for b in robot.bodies[1:]:
        q[b.q_index] = next(v for part, v in STAND.items() if part in b.joint.name)
    return q


def dynamics(robot, kind, out_dir):
    """pv(q, v, tau, k) as a casadi.Function: the SX function or the compiled one (external)."""
    if kind == "symbolic":
        return cd.casadi_function(robot, "4F3", "pv")
    f = cd.generate(robot, "4F3", "pv", out_dir=out_dir, casadi_derivatives=True)
    return f.casadi_function()


def solve(knots=10, dt=0.05, kind="symbolic", out_dir="codegen_out", print_level=5, hessian="exact"):
    """Build and solve the problem; returns (IPOPT's return status, final constraint violation,
    the solution's trunk heights)."""
    robot = cd.load_robot("go1")
    pv, plus = dynamics(robot, kind, out_dir), integrate_function(robot)
    q0, na = standing_q(robot), robot.nv - 6
    opti = ca.Opti()
    Q, V, U = opti.variable(robot.nq, knots + 1), opti.variable(robot.nv, knots + 1), opti.variable(na, knots)
    cost = 1e4 * (Q[2, knots] - (TRUNK_HEIGHT - DIP)) ** 2
    for k in range(knots):
        tau = ca.vertcat(np.zeros(6), U[:, k])
        vdot = pv(Q[:, k], V[:, k], tau, np.zeros(12))[0]
        opti.subject_to(V[:, k + 1] == V[:, k] + dt * vdot)                 # semi-implicit Euler
        opti.subject_to(Q[:, k + 1] == plus(Q[:, k], dt * V[:, k + 1]))     # on the manifold
        cost += 1e-2 * ca.sumsqr(U[:, k]) + 1e-1 * ca.sumsqr(V[:, k + 1])
        opti.subject_to(opti.bounded(-TORQUE, U[:, k], TORQUE))
        opti.subject_to(opti.bounded(q0[7:] - SWING, Q[7:, k + 1], q0[7:] + SWING))     # near the posture
    opti.subject_to(Q[:, 0] == q0)
    opti.subject_to(V[:, 0] == 0)
    # the trunk comes to rest: its 6 velocities only (the feet's rows of J v follow from the contact;
    # asking all 18 for zero over-determines the torques, which move 6 directions)
    opti.subject_to(V[:6, knots] == 0)
    opti.minimize(cost)
    # initial guess: standing still, the torques that hold the standing posture (gravity)
    opti.set_initial(Q, np.tile(q0[:, None], knots + 1))
    opti.set_initial(V, 0)
    opti.solver("ipopt", {"print_time": False},
                {"print_level": print_level, "max_iter": 500, "hessian_approximation": hessian})
    try:
        opti.solve()
    except RuntimeError as exc:     # IPOPT ran and did not converge: its stats say what it reached
        if "return_status" not in _stats_or_none(opti):
            raise exc from None     # it never ran (e.g. the problem could not be built)
    stats = opti.stats()
    violation = stats["iterations"]["inf_pr"][-1] if stats.get("iterations") else float("nan")
    return stats["return_status"], violation, np.array(opti.debug.value(Q[2, :])).ravel()


def _stats_or_none(opti):
    """IPOPT's stats, or {} when it never ran (Opti then refuses to give any)."""
    try:
        return opti.stats()
    except RuntimeError:
        return {}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--knots", type=int, default=10)
    p.add_argument("--dt", type=float, default=0.05)
    p.add_argument("--dynamics", choices=["symbolic", "compiled"], default="symbolic")
    p.add_argument("--hessian", choices=["exact", "limited-memory"], default="exact",
                   help="IPOPT's hessian_approximation")
    p.add_argument("-o", "--out", default="codegen_out", help="where the compiled dynamics go (--dynamics compiled)")
    args = p.parse_args()
    t0 = time.perf_counter()
    status, violation, z = solve(args.knots, args.dt, args.dynamics, args.out, hessian=args.hessian)
    print(f"\nIPOPT status: {status}")
    print(f"final constraint violation (inf_pr): {violation:.2e}")
    print("trunk height (m): " + " ".join(f"{h:.3f}" for h in z))
    print(f"{args.knots} knots, {args.dynamics} dynamics, Hessian approximation: {args.hessian}: "
          f"{time.perf_counter() - t0:.1f} s")
    return 0 if status == "Solve_Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
