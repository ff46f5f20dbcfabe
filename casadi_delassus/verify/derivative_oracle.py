"""Jacobians of the dynamics against Pinocchio's analytical derivatives (the outside oracle of
issue 14): ``rnea`` against ``computeRNEADerivatives``, ``aba`` against
``computeABADerivatives``, ``pv`` and ``ltl`` (3D and 6D frame contacts) against
``constraintDynamics`` + ``computeConstraintDynamicsDerivatives``.

Pinocchio holds each contact's acceleration at its reference k₀(q, v) (zero LOCAL
acceleration: 0 for a 6D contact, −ω × v_p for a 3D point, pinocchio_oracle.zero_acceleration_k)
while our k is an input, so a constrained Jacobian is compared as ∂/∂x + ∂/∂k · ∂k₀/∂x, with
∂k₀/∂(q, v) by CasADi's AD of our own expression of k₀ (``zero_acceleration_k_sx``, q-columns in
the tangent space), whose value is checked against the oracle's at every point.  Error per
Jacobian: max |ours − Pinocchio| / max(1, max |Pinocchio|).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..errors import DelassusError
from ..model.integrate import tangent_map_sx
from ..sweeps.tree import Tree
from . import pinocchio_oracle as oracle

PIN_TOL = 1e-8
# what each algorithm's Jacobian must be taken with respect to for the comparison
ORACLE_WRT = {"rnea": ("q", "v", "a"), "aba": ("q", "v", "tau"), "pv": ("q", "v", "tau", "k"),
              "pv_early": ("q", "v", "tau", "k"), "ltl": ("q", "v", "tau", "k")}
PIN_RULE = (f"rnea, aba, pv, pv_early, ltl Jacobians against Pinocchio's computeRNEADerivatives, computeABADerivatives, "
            f"computeConstraintDynamicsDerivatives (k = Pinocchio's zero contact acceleration, chained through "
            f"∂k₀/∂(q, v)); passes at max |ours − Pinocchio| / max(1, |Pinocchio|) ≤ {PIN_TOL:g}")


def zero_acceleration_k_sx(robot, constraints, q, v):
    """k₀(q, v) as SX: 0 for a 6D contact, −ω_F × v_p for a 3D point (frame axes)."""
    vel, _, _ = Tree(robot, constraints, q).velocities(v)
    k = []
    for c, K in zip(constraints.constraints, constraints.K_body()):
        nu = ca.vertcat(*vel[c.body])
        if c.kind == "6d":
            k.append(ca.SX(6, 1))
            continue
        R = robot.frame(c.link).rotation
        k.append(-ca.cross(ca.mtimes(ca.DM(R.T), nu[:3]), ca.mtimes(ca.DM(K), nu)))
    return ca.vertcat(*k)


def _k0_function(robot, constraints):
    q, v = ca.SX.sym("q", robot.nq), ca.SX.sym("v", robot.nv)
    k0 = zero_acceleration_k_sx(robot, constraints, q, v)
    return ca.Function("k0", [q, v], [k0, ca.mtimes(ca.jacobian(k0, q), tangent_map_sx(robot, q)), ca.jacobian(k0, v)])


def not_comparable(algorithm, wrt):
    """Why a Jacobian of ``algorithm`` with respect to ``wrt`` cannot be compared with
    Pinocchio's (an algorithm it has no derivatives of, or inputs its derivatives need that
    ``wrt`` leaves out), or None when it can."""
    if algorithm not in ORACLE_WRT:
        return f"Pinocchio has no derivatives of {algorithm} (it has {', '.join(ORACLE_WRT)})"
    missing = [w for w in ORACLE_WRT[algorithm] if w not in wrt]
    if missing:
        return f"Pinocchio's {algorithm} Jacobian needs {', '.join(missing)} in --wrt"
    return None


def pinocchio_errors(jacobian, robot, constraints, algorithm, samples=20, seed=6):
    """({Jacobian name: worst relative error}, worst error of k₀) of ``jacobian`` ({input:
    value} -> {"d<output>_d<input>": array}, with respect to at least ORACLE_WRT[algorithm])
    against Pinocchio on ``samples`` random (q, v, τ) (the module docstring's rule)."""
    import pinocchio as pin
    if algorithm not in ORACLE_WRT:
        raise DelassusError(f"Pinocchio has no derivatives of {algorithm!r} (it has {', '.join(ORACLE_WRT)})")
    model = oracle.model_for(robot)
    data = model.createData()
    constrained = "k" in ORACLE_WRT[algorithm]
    if constrained:
        cms = oracle.frame_constraint_models(model, constraints.specs)
        if cms is None:
            raise DelassusError(f"Pinocchio's constraintDynamics takes contacts (LINK:3d, LINK:6d) on its model's "
                                f"frames only, not {', '.join(constraints.specs)}")
        cds = pin.StdVec_RigidConstraintData()
        for cm in cms:
            cds.append(cm.createData())
        pin.initConstraintDynamics(model, data, cms, cds)
        k0 = _k0_function(robot, constraints)
    rng = np.random.default_rng(seed)
    worst, k_err = {}, 0.0
    for _ in range(samples):
        x = {"q": robot.random_q(rng), "v": rng.normal(size=robot.nv), "tau": rng.normal(size=robot.nv),
             "a": rng.normal(size=robot.nv)}
        if not constrained:
            names = ("dtau_dq", "dtau_dv", "dtau_da") if algorithm == "rnea" else ("dvdot_dq", "dvdot_dv", "dvdot_dtau")
            pin_fn = pin.computeRNEADerivatives if algorithm == "rnea" else pin.computeABADerivatives
            last = "a" if algorithm == "rnea" else "tau"
            ref = dict(zip(names, (np.array(e) for e in pin_fn(model, data, x["q"], x["v"], x[last]))))
            got = jacobian({"q": x["q"], "v": x["v"], last: x[last]})
        else:
            kn, dk_dq, dk_dv = (np.array(e) for e in k0(x["q"], x["v"]))
            k_err = max(k_err, float(np.abs(kn.ravel() - oracle.zero_acceleration_k(model, data, cms, x["q"], x["v"])).max()))
            raw = jacobian({"q": x["q"], "v": x["v"], "tau": x["tau"], "k": kn.ravel()})
            got = {n: raw[n] + (raw[n[:n.rindex("_d")] + "_dk"] @ {"q": dk_dq, "v": dk_dv}[n[-1]] if n[-1] in "qv" else 0.0)
                   for n in raw if not n.endswith("_dk")}
            pin.constraintDynamics(model, data, x["q"], x["v"], x["tau"], cms, cds)
            ref = dict(zip(("dvdot_dq", "dvdot_dv", "dvdot_dtau", "dlam_dq", "dlam_dv", "dlam_dtau"),
                           (np.array(e) for e in pin.computeConstraintDynamicsDerivatives(model, data, cms, cds))))
        for n, r in ref.items():
            err = float(np.abs(np.asarray(got[n]) - r).max() / max(1.0, np.abs(r).max()))
            worst[n] = max(worst.get(n, 0.0), err)
    return worst, k_err
