"""The contact step's compiled derivatives (codegen/step_derivatives.py) loaded and called: the sealed library opened
once (library.open_sealed, kind "step_derivatives", its functions through casadi.external), the linearisation point
checked as the step checks its arguments, and the implicit system of contact/step_derivatives.py solved at run time
(the Jacobian, JVP and VJP)."""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..contact.residuals import residuals
from ..contact.step import contact_frames
from ..contact.step_derivatives import (KINDS, RANK_RTOL, SOLUTION_TOL, Point, PseudoInverse, StepJacobian,
                                        block_diag, checked_modes, classify, mode_jacobians)
from ..errors import DelassusError, InputError
from .artifact import BUILT_KINDS
from .contact_step import check_dt, check_mu, check_normals, check_q, check_state
from .inputs import real_array
from .library import open_sealed


class LoadedDerivatives:
    """The compiled derivatives at the sealed manifest ``path`` (codegen/step_derivatives.py), functions
    ``<name>_<kind>``, of the step of ``robot`` and its contacts (a ConstraintSet), ``mu`` the default friction
    (stepping/derivatives.py StepDerivatives builds it)."""

    def __init__(self, path, name, robot, contacts, mu):
        self.robot, self.contacts = robot, contacts
        self.nc = self.contacts.m // 3
        self.mu = check_mu(mu, self.nc)
        self.manifest, self._f, _ = open_sealed(path, BUILT_KINDS, "step_derivatives",
                                                lambda so: {k: ca.external(f"{name}_{k}", so) for k in KINDS})
        self.files = path.with_suffix("")

    def point(self, q, v, tau, lam, dt=1e-3, mu=None, normals=None, modes=None, tol=SOLUTION_TOL):
        """The linearisation at a solution λ (contact frames) of the step from (q, v, τ), each
        contact in its ``modes`` (default: ``classify``'s); the arguments are checked as the step checks them
        (runtime/contact_step.py: finite states, unit quaternions, dt, μ, normals), and λ must solve the exact problem of the step
        to ``tol`` (its largest residual, residuals.py), else an InputError; DelassusError when A is singular in a
        direction that moves v_next (then not even v_next's derivative is determined)."""
        nc, r = self.nc, self.robot
        q = check_q(r, q)
        v, tau = (check_state(n, x, r.nv) for n, x in (("v", v), ("tau", tau)))
        lam = check_state("lam", real_array("lam", lam).reshape(-1), 3 * nc)
        dt = check_dt(dt)
        mu = self.mu if mu is None else check_mu(mu, nc)
        n = check_normals(normals, nc)
        R = block_diag(contact_frames(np.tile([0.0, 0.0, 1.0], (nc, 1)) if n is None else n[0]))
        args = (q, v, tau, np.array(dt), R.T @ lam)
        v_next, sigma_w, W, G = (np.asarray(a) for a in self._f["parts"](*args))
        sigma, W, G = R @ sigma_w.reshape(-1), W @ R.T, R @ G @ R.T
        worst = residuals(lam, sigma, mu).max()
        if not worst <= tol:
            raise InputError(f"lam is not a solution of the step's problem: its largest residual is {worst:.3g} > "
                             f"tol = {tol:g} (pass the step's own lam, solved to tol)")
        modes = classify(lam, sigma, mu) if modes is None else checked_modes(modes, sigma)
        F_lam, F_sig = mode_jacobians(lam, sigma, mu, modes)
        A, null = PseudoInverse.of(F_lam + F_sig @ G)
        # W on A's null space is rounding (≈ 1e-16 relative) where v_next's derivative is determined
        if len(null) and np.max(np.abs(W @ null.T)) > RANK_RTOL ** 0.5 * np.max(np.abs(W)):
            raise DelassusError(f"modes {modes}: the implicit system is singular along a direction that moves v_next "
                                "(no derivative of v_next is determined)")
        return Point(args, R, v_next.reshape(-1), lam, sigma, W, A, F_sig, modes, not len(null))

    def jacobian(self, *args, **kwargs):
        """StepJacobian at the solution λ of the step from (q, v, τ) (``point``'s arguments),
        assembled from the compiled forward mode, one column per input direction."""
        p = self.point(*args, **kwargs)
        n = 3 * self.robot.nv
        return StepJacobian(*self._jvp(p, np.eye(n)), p.modes, p.unique)

    def _jvp(self, p, X):
        """(V X + W dΛ, dΛ) for the tangents X (3nv × k), dΛ = −A⁺ F_σ S X: one mapped call."""
        f = self._f["fwd"] if X.shape[1] == 1 else self._f["fwd"].map(X.shape[1])
        vd, sd = (np.asarray(a) for a in f(*p.args, X))
        dlam = -p.A.solve(p.F_sig @ p.R @ sd)
        return vd + p.W @ dlam, dlam

    def jvp(self, p, q_dot, v_dot, tau_dot):
        """(v_next_dot, lam_dot) along the tangent (q̇ (nv), v̇, τ̇), each nv finite numbers, at the Point ``p``."""
        _check_point(p)
        nv = self.robot.nv
        x = [check_state(n, real_array(n, a).reshape(-1), nv) for n, a in (("q_dot", q_dot), ("v_dot", v_dot),
                                                                            ("tau_dot", tau_dot))]
        vd, ld = self._jvp(p, np.concatenate(x)[:, None])
        return vd[:, 0], ld[:, 0]

    def vjp(self, p, v_next_bar, lam_bar=None):
        """(q_bar (nv, cotangent), v_bar, tau_bar) for the cotangents of v_next (nv) and λ (m) at ``p``."""
        _check_point(p)
        v_next_bar = check_state("v_next_bar", real_array("v_next_bar", v_next_bar).reshape(-1), self.robot.nv)
        lam_bar = np.zeros(len(p.lam)) if lam_bar is None else \
            check_state("lam_bar", real_array("lam_bar", lam_bar).reshape(-1), len(p.lam))
        y = p.A.solve(p.W.T @ v_next_bar + lam_bar, transpose=True)
        x_bar = np.asarray(self._f["adj"](*p.args, v_next_bar, -p.R.T @ (p.F_sig.T @ y))).reshape(-1)
        return tuple(np.split(x_bar, 3))


def _check_point(p):
    """An InputError unless ``p`` is a Point (``StepDerivatives.point``'s)."""
    if not isinstance(p, Point):
        raise InputError(f"expected the Point of StepDerivatives.point(...), got {type(p).__name__}")
