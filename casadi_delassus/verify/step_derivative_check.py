"""Checks of the contact step's derivatives (contact/step_derivatives.py) on the problems of
verify/contact_problems.py (it builds steps through stepping/): the Jacobian against
central finite differences of the compiled step itself (mode fixed: every contact keeps its
mode at x ± h eⱼ, each solve to ``tol`` from a cold start), and JVP against VJP by the
dot-product test.

Error of a block (output × input group): max |ours − FD| / max |FD| over the block (an input
group: the nv tangent q columns, v, or τ)."""
from __future__ import annotations

import numpy as np

from ..errors import DelassusError
from ..model.integrate import integrate
from ..contact.step_derivatives import classify
from ..stepping.contact import contact_step
from ..stepping.derivatives import step_derivatives
from . import contact_problems as cp

GROUPS = ("q", "v", "tau")


def build(name, out_dir, cflags=("-O1",)):
    """(problem, compiled step, compiled derivatives) for a contact_problems name or Problem."""
    p = cp.build(name) if isinstance(name, str) else name
    kw = dict(out_dir=out_dir, cflags=cflags)
    # pv_osim: every Delassus algorithm gives the same G, and choosing the cheapest traces them all; the dense
    # linear solve: finite differences need solves to 1e-12, below the matrix-free route's accumulated rounding on talos;
    # ADMM: where λ is not unique (a foot twice), its split stays inside the cone, where PGS's may reach the boundary
    return (p, contact_step(p.robot, p.specs, solver="admm", mu=p.mu, delassus="pv_osim", linear_solve="dense", **kw),
            step_derivatives(p.robot, p.specs, mu=p.mu, **kw))


def _solve(step, p, q, v, tau, lam0, tol):
    """(v_next, λ, modes) of one step solved to ``tol``."""
    r = step(q, v, tau, dt=p.dt, mu=p.mu, lam0=lam0, tol=tol, max_iter=100_000)
    if r.status != "converged":
        raise DelassusError(f"{p.name}: the step did not converge to {tol:g} ({r.status})")
    return r.v_next, r.lam, classify(r.lam, r.sigma, p.mu)


def finite_differences(step, deriv, p, h, tol=1e-12):
    """(central FD of v_next and λ, nv+m × 3nv, λ* and the modes at x) with every contact's
    mode checked unchanged at each x ± h eⱼ; the τ columns take the step h/dt (τ moves v by
    dt M⁻¹ τ), and every solve starts cold: a sliding contact's residuals are of second
    order in the slip direction, so a warm start from λ* passes the tolerance unmoved."""
    nv = deriv.robot.nv
    _, lam0, modes = _solve(step, p, p.q, p.v, p.tau, None, tol)
    cols = []
    for j in range(3 * nv):
        outs, hj = [], h / p.dt if j >= 2 * nv else h
        for s in (hj, -hj):
            e = np.zeros(3 * nv)
            e[j] = s
            q = integrate(deriv.robot, p.q, e[:nv])
            v_n, lam, m = _solve(step, p, q, p.v + e[nv:2 * nv], p.tau + e[2 * nv:], None, tol)
            if m != modes:
                raise DelassusError(f"{p.name}: column {j}: a contact changed mode within ±{h:g} ({modes} → {m})")
            outs.append(np.concatenate([v_n, lam]))
        cols.append((outs[0] - outs[1]) / (2 * hj))
    return np.array(cols).T, lam0, modes


def block_errors(ours, fd, nv):
    """{(output, group): max |ours − FD| / max |FD|} over the column groups q, v, τ."""
    out = {}
    for o, rows in (("v_next", slice(0, nv)), ("lam", slice(nv, None))):
        for k, g in enumerate(GROUPS):
            a, b = ours[rows, k * nv:(k + 1) * nv], fd[rows, k * nv:(k + 1) * nv]
            out[o, g] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
    return out


def dot_test(deriv, point, rng, lam_bar=True):
    """|⟨u, J w⟩ − ⟨Jᵀu, w⟩| / max(|⟨u, J w⟩|, |⟨Jᵀu, w⟩|) for random w, u (u on λ too when
    ``lam_bar``)."""
    nv, m = deriv.robot.nv, len(point.lam)
    w = rng.standard_normal(3 * nv)
    u_v, u_l = rng.standard_normal(nv), rng.standard_normal(m) if lam_bar else np.zeros(m)
    vd, ld = deriv.jvp(point, *np.split(w, 3))
    xb = np.concatenate(deriv.vjp(point, u_v, u_l))
    left, right = u_v @ vd + u_l @ ld, xb @ w
    return abs(left - right) / max(abs(left), abs(right), 1e-300)


def check(name, out_dir, h, cflags=("-O1",), tol=1e-12, seed=0):
    """(block errors against FD, dot-product error, modes) on problem ``name``; λ's blocks (and
    λ's cotangent in the dot test) are left out when λ is not unique (talos: derivatives of
    v_next only)."""
    p, step, deriv = build(name, out_dir, cflags)
    name = p.name
    fd, lam, modes = finite_differences(step, deriv, p, h, tol)
    nv = deriv.robot.nv
    jac = deriv.jacobian(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu)
    errors = block_errors(np.vstack([jac.dv_next, jac.dlam]), fd, nv)
    if not jac.unique:
        errors = {k: e for k, e in errors.items() if k[0] == "v_next"}
    point = deriv.point(p.q, p.v, p.tau, lam, dt=p.dt, mu=p.mu)
    dot = max(dot_test(deriv, point, np.random.default_rng(seed + i), jac.unique) for i in range(5))
    return errors, dot, modes
