"""Derivatives of the contact step (contact/step.py) by implicit differentiation of the solved
problem at its solution: ∂(v_next, λ)/∂(q, v, τ), q in the tangent space (model/integrate.py).

The step (Pinocchio 4's convention; Carpentier et al. 2024, "From compliant to rigid contact
simulation: a unified and efficient approach", RSS, Sec. III) is, for x = (q, v, τ),

    v_next(x, λ) = v + dt·ABA(q, v, τ) + M⁻¹(q) J(q)ᵀ λ,    σ(x, λ) = J(q) v_next = Gλ + g,

with λ a solution of K_μ ∋ λ ⊥ σ + Γ(σ) ∈ K_μ* (cones.py, the De Saxcé map Γ).  Away from
mode changes each contact i satisfies three smooth equations F_i(λ, σ) = 0 by its mode:

- separating (λ_i = 0, σ_n > 0):                     F_i = λ_i
- sticking   (σ_i = 0, λ_i inside the cone):          F_i = σ_i
- sliding    (σ_n = 0, σ_t ≠ 0, λ on the boundary):   F_i = (λ_t + μ λ_n σ_t/‖σ_t‖, σ_n)

The sliding block is what λ ⊥ σ + Γ(σ) leaves on the cone's boundary: σ + Γ(σ) on the dual
cone's boundary exactly opposite λ, i.e. λ_t = −μ λ_n σ_t/‖σ_t‖ and, with Γ_n = μ‖σ_t‖,
σ_n = 0.  Differentiating F(λ(x), σ(x, λ(x))) = 0 gives

    A dλ = −F_σ S dx,   A = F_λ + F_σ G,   S = ∂σ/∂x |_λ,   G = ∂σ/∂λ = J M⁻¹ Jᵀ,
    dv_next = V dx + W dλ,   V = ∂v_next/∂x |_λ,   W = M⁻¹ Jᵀ.

W, G and the products (V ẋ, S ẋ) (forward mode) and Vᵀv̄ + Sᵀσ̄ (reverse mode) are SX traced
once per robot from the registry's ABA, the constraint Jacobian and the model's integrate,
and compiled; V and S are never formed (a dense ``casadi.jacobian`` over the 3nv inputs is
about nv times the forward mode's code, and ran gcc out of memory on talos): the
Jacobian is the forward mode's 3nv columns, one mapped call.  F_λ, F_σ and the m×m solves with
A are NumPy at run time (they depend on the modes).

A singular A: λ is not unique when contacts outnumber what they constrain (talos's eight
sole corners: four points on each rigid sole, G = J M⁻¹ Jᵀ of rank 12 of 24, A = G when all
stick), and dλ is then determined up to null(A) = null(Jᵀ).  dλ is taken as A⁺ b, the
minimum-norm solution (SVD, rank by RANK_RTOL), rather than a Tikhonov-regularised
(AᵀA + εI)⁻¹Aᵀ b: v_next's derivative is the same for every solution dλ because W = M⁻¹Jᵀ
vanishes on null(A) (``point`` checks it and refuses an A where it does not), so A⁺ gives
exactly the derivative that finite differences of the step see, whichever λ the solver
picks, where a regularisation would bias it by O(ε/s²) and need an ε; the right-hand side
lies in A's range (J keeps its rank as q moves: the soles stay rigid), so A⁺ b solves the
equations rather than a least-squares compromise.  The minimum-norm dλ is not the
derivative of the λ the solver returns (ADMM from a cold start picks its own): only v_next's
derivative is meaningful then (``StepJacobian.unique`` False).
"""
from __future__ import annotations

from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..version import __version__
from ..codegen.build import BUILT_KINDS, build_cached, host_cpu, resolve_cflags
from ..runtime.library import open_sealed
from ..codegen.emit import casadi_source
from ..errors import DelassusError, InputError
from ..model import load_robot
from ..model.integrate import integrate_sx
from ..opcount import count_ops
from ..registry import get_algorithm
from ..runtime import artifact
from ..runtime.compiler import find_compiler
from ..symbolic.frames import local_transforms
from ..sweeps.joint_space import constraint_jacobian
from ..runtime.inputs import real_array
from .residuals import residuals
from ..codegen.contact_step import DEFAULT_OUT, build_key, scenario_name
from ..runtime.contact_step import check_dt, check_mu, check_normals, check_q, check_state
from .step import check_contacts, contact_frames, minv_apply

MODES = ("separating", "sticking", "sliding")
KINDS = ("parts", "fwd", "adj")
DEFAULT_CFLAGS = ("auto",)      # codegen/build.py resolve_cflags, by the largest function's size
# Singular values of A below RANK_RTOL·σ_max are A's null space: G = J M⁻¹ Jᵀ's are rounding
# (≈ 1e-16·σ_max) where λ is not unique, the smallest real one well above (talos_stand: docs)
RANK_RTOL = 1e-10
SLIP_TOL = 1e-8                 # m/s: a contact slips (can be sliding) above it
# the largest residual (residuals.py) a given λ may have: the derivatives are those of the step at a solution, and
# a λ that is none (NaN, another problem's, a guess) once gave matrices all the same; the step's default tol (1e-10)
# passes with room for a λ solved to 1e-8
SOLUTION_TOL = 1e-8


def traced_functions(robot, cs, name):
    """casadi.Functions of (q, v, tau, dt, lam) with λ in world-aligned rows:
    ``<name>_parts`` → (v_next, sigma, W, G), ``<name>_fwd`` (+ x_dot) → (v_dot, sigma_dot) =
    (V ẋ, S ẋ), ``<name>_adj`` (+ v_bar, sigma_bar) → x_bar = Vᵀ v̄ + Sᵀ σ̄, with x = [δq, v, τ]
    and q entering as q ⊕ δ at δ = 0.  No dense V or S: ``casadi.jacobian`` over the 3nv inputs
    multiplies the code by about nv (docs/contact_derivatives.md), so the Jacobian is assembled
    from ``fwd``'s columns at run time."""
    nv, m = robot.nv, cs.m
    q, v, tau, dt, lam, delta = (ca.SX.sym(n, k) for n, k in (("q", robot.nq), ("v", nv), ("tau", nv), ("dt", 1),
                                                               ("lam", m), ("delta", nv)))
    qp = integrate_sx(robot, q, delta)
    K = cs.symbolic_K_bodies(qp, {})
    aba = get_algorithm("aba").fn
    J = constraint_jacobian(robot, cs, local_transforms(robot, qp), K)
    v_next = v + dt * aba(robot, cs, qp, K, v, tau)["vdot"] + minv_apply(robot, cs, qp, K, J.T @ lam)
    sigma = J @ v_next
    x, out = ca.vertcat(delta, v, tau), ca.vertcat(v_next, sigma)
    x_dot, v_bar, s_bar = ca.SX.sym("x_dot", 3 * nv), ca.SX.sym("v_bar", nv), ca.SX.sym("sigma_bar", m)
    at0 = (lambda *e: ca.cse([ca.densify(ca.substitute(a, delta, ca.SX.zeros(nv))) for a in e]))
    ins, names = [q, v, tau, dt, lam], ["q", "v", "tau", "dt", "lam"]
    fwd = ca.jtimes(out, x, x_dot)
    return (ca.Function(f"{name}_parts", ins, at0(v_next, sigma, ca.jacobian(v_next, lam), ca.jacobian(sigma, lam)),
                        names, ["v_next", "sigma", "W", "G"]),
            ca.Function(f"{name}_fwd", ins + [x_dot], at0(fwd[:nv], fwd[nv:]), names + ["x_dot"],
                        ["v_dot", "sigma_dot"]),
            ca.Function(f"{name}_adj", ins + [v_bar, s_bar], at0(ca.jtimes(out, x, ca.vertcat(v_bar, s_bar), True)),
                        names + ["v_bar", "sigma_bar"], ["x_bar"]))


def build(robot, cs, scenario, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, model=None):
    """Compile the three functions into one library (cached by a hash of what determines them);
    returns ({short name: casadi.external}, the files' path without suffix: .c, .so, .json, the manifest), loaded
    through runtime/library.open_sealed.
    gcc's time and memory grow faster than linearly with the largest function in the file
    (codegen/build.py), so "auto" picks the level from that function's instruction count; the
    manifest (.json) records the counts, the C size, the flags and the compile time."""
    cc = find_compiler(cc)
    model = artifact.model_name(robot, model)
    name = artifact.function_name(model, scenario, "contact") + "_deriv"
    auto = any(f.startswith("auto") for f in cflags)
    key = build_key(robot, cs, cflags, cc, host=host_cpu() if auto else None)

    def make():
        functions = traced_functions(robot, cs, name)
        sizes = {f.name().rsplit("_", 1)[1]: count_ops(f)["instructions"] for f in functions}
        flags = resolve_cflags(cflags, max(sizes.values()), cc, kind="derivative") if auto else cflags
        source = casadi_source(functions[0], functions[1:])
        return source, flags, {"function": name, "instructions": sizes, "c_bytes": len(source.encode()), "cc": cc,
                               "cflags": list(flags), "version": __version__}
    stem = f"contact_deriv_{key[:16]}"
    path = build_cached(artifact.folder(out_dir, model, scenario), stem, make, cc, key, "step_derivatives", timed=True)
    manifest, functions, _ = open_sealed(path, BUILT_KINDS, "step_derivatives",
                                         lambda so: {k: ca.external(f"{name}_{k}", so) for k in KINDS})
    return functions, path.with_suffix(""), manifest


def classify(lam, sigma, mu, lam_tol=1e-9, vel_tol=SLIP_TOL):
    """Each contact's mode from a solution (λ, σ) in contact frames: separating when λ_n ≤
    lam_tol·max|λ|, sliding when ‖σ_t‖ > vel_tol (m/s), sticking otherwise; InputError at a
    mode boundary (λ = 0 with σ_n ≈ 0, or sticking with λ on the cone's boundary), where the
    step is not differentiable."""
    lam, sigma = np.reshape(lam, (-1, 3)), np.reshape(sigma, (-1, 3))
    small = lam_tol * max(np.max(np.abs(lam), initial=0.0), 1e-300)
    slip = np.hypot(sigma[:, 0], sigma[:, 1])
    modes = []
    for i, (l_i, s_i, mu_i) in enumerate(zip(lam, sigma, np.broadcast_to(mu, (len(lam),)))):
        if l_i[2] <= small:
            if s_i[2] <= vel_tol:
                raise InputError(f"contact {i}: λ = 0 and σ_n = {s_i[2]:.3g} (grazing): "
                                 "no derivative at a mode boundary")
            modes.append("separating")
        elif slip[i] > vel_tol:
            modes.append("sliding")
        elif mu_i * l_i[2] - np.hypot(l_i[0], l_i[1]) <= small:
            raise InputError(f"contact {i}: sticking with λ on the cone's boundary: no derivative at a mode boundary")
        else:
            modes.append("sticking")
    return tuple(modes)


def mode_jacobians(lam, sigma, mu, modes):
    """(F_λ, F_σ): the per-mode equations' Jacobians (m × m, block diagonal)."""
    m = len(lam)
    F_lam, F_sig = np.zeros((m, m)), np.zeros((m, m))
    for i, mode in enumerate(modes):
        r = slice(3 * i, 3 * i + 3)
        if mode == "separating":
            F_lam[r, r] = np.eye(3)
        elif mode == "sticking":
            F_sig[r, r] = np.eye(3)
        else:
            l_i, s_t, mu_i = lam[r], sigma[3 * i:3 * i + 2], np.broadcast_to(mu, (m // 3,))[i]
            n = np.linalg.norm(s_t)
            u = s_t / n
            F_lam[3 * i:3 * i + 2, 3 * i:3 * i + 2] = np.eye(2)
            F_lam[3 * i:3 * i + 2, 3 * i + 2] = mu_i * u
            F_sig[3 * i:3 * i + 2, 3 * i:3 * i + 2] = mu_i * l_i[2] * (np.eye(2) - np.outer(u, u)) / n
            F_sig[3 * i + 2, 3 * i + 2] = 1.0
    return F_lam, F_sig


@dataclass(frozen=True)
class PseudoInverse:
    """A⁺ by the SVD, rank from RANK_RTOL: A⁺b is the minimum-norm least-squares solution."""
    U: np.ndarray
    s_inv: np.ndarray
    Vt: np.ndarray

    @classmethod
    def of(cls, A):
        U, s, Vt = np.linalg.svd(A)
        r = int(np.sum(s > RANK_RTOL * s[0]))
        return cls(U[:, :r], 1.0 / s[:r], Vt[:r]), Vt[r:]

    def solve(self, b, transpose=False):
        """A⁺ b (b: a vector or columns), or (Aᵀ)⁺ b = (A⁺)ᵀ b when ``transpose``."""
        left, right = (self.U, self.Vt.T) if transpose else (self.Vt.T, self.U)
        scale = self.s_inv if np.ndim(b) == 1 else self.s_inv[:, None]
        return left @ (scale * (right.T @ b))


@dataclass(frozen=True)
class Point:
    """The linearisation point: the numbers the implicit system needs (contact frames)."""
    args: tuple         # (q, v, tau, dt, λ world-aligned) for the compiled functions
    R: np.ndarray       # block-diagonal frame rotation: rows [t₁, t₂, n] = R · world rows
    v_next: np.ndarray
    lam: np.ndarray
    sigma: np.ndarray
    W: np.ndarray
    A: PseudoInverse
    F_sig: np.ndarray
    modes: tuple
    unique: bool        # whether λ (and dλ) is unique: A of full rank


@dataclass(frozen=True)
class StepJacobian:
    """∂v_next/∂x and ∂λ/∂x with columns x = [δq (nv, tangent), v (nv), τ (nv)]; λ in contact
    frames (minimum-norm dλ when λ is not unique: ``unique`` False), and each contact's mode."""
    dv_next: np.ndarray
    dlam: np.ndarray
    modes: tuple
    unique: bool


class StepDerivatives:
    """Compiled derivatives of ``contact_step(robot, contacts)`` (``step_derivatives``)."""

    def __init__(self, robot, contacts, mu=0.8, out_dir=DEFAULT_OUT, cflags=DEFAULT_CFLAGS, cc=None, name=None):
        self.robot = load_robot(robot)
        self.contacts = check_contacts(self.robot, contacts)
        self.nc = self.contacts.m // 3
        self.mu = check_mu(mu, self.nc)
        scenario = scenario_name("contact", self.contacts.specs)
        self._f, self.files, self.manifest = build(self.robot, self.contacts, scenario, out_dir, tuple(cflags), cc, name)

    def point(self, q, v, tau, lam, dt=1e-3, mu=None, normals=None, modes=None, tol=SOLUTION_TOL):
        """The linearisation at a solution λ (contact frames) of the step from (q, v, τ), each
        contact in its ``modes`` (default: ``classify``'s); the arguments are checked as the step checks them
        (step.py: finite states, unit quaternions, dt, μ, normals), and λ must solve the exact problem of the step
        to ``tol`` (its largest residual, residuals.py), else an InputError; DelassusError when A is singular in a
        direction that moves v_next (then not even v_next's derivative is determined)."""
        nc, r = self.nc, self.robot
        q = check_q(r, q)
        v, tau = (check_state(n, x, r.nv) for n, x in (("v", v), ("tau", tau)))
        lam = check_state("lam", real_array("lam", lam).reshape(-1), 3 * nc)
        dt = check_dt(dt)
        mu = self.mu if mu is None else check_mu(mu, nc)
        n = check_normals(normals, nc)
        R = _block_diag(contact_frames(np.tile([0.0, 0.0, 1.0], (nc, 1)) if n is None else n[0]))
        args = (q, v, tau, np.array(dt), R.T @ lam)
        v_next, sigma_w, W, G = (np.asarray(a) for a in self._f["parts"](*args))
        sigma, W, G = R @ sigma_w.reshape(-1), W @ R.T, R @ G @ R.T
        worst = residuals(lam, sigma, mu).max()
        if not worst <= tol:
            raise InputError(f"lam is not a solution of the step's problem: its largest residual is {worst:.3g} > "
                             f"tol = {tol:g} (pass the step's own lam, solved to tol)")
        modes = classify(lam, sigma, mu) if modes is None else _checked_modes(modes, sigma)
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


def _checked_modes(modes, sigma):
    """``modes`` as a tuple, one of MODES per contact; a sliding one must slip (‖σ_t‖ >
    SLIP_TOL: its block divides by ‖σ_t‖)."""
    modes, slip = tuple(modes), np.hypot(sigma[0::3], sigma[1::3])
    if len(modes) != len(slip) or not set(modes) <= set(MODES):
        raise InputError(f"modes: expected {len(slip)} of {', '.join(MODES)}, got {modes}")
    still = [i for i, m in enumerate(modes) if m == "sliding" and not slip[i] > SLIP_TOL]
    if still:
        raise InputError(f"modes: contact {still[0]} is given as sliding but does not slip "
                         f"(|σ_t| = {slip[still[0]]:.3g} m/s)")
    return modes


def _block_diag(frames):
    """The block-diagonal matrix of the contacts' 3×3 frames."""
    R = np.zeros((3 * len(frames),) * 2)
    for i, f in enumerate(frames):
        R[3 * i:3 * i + 3, 3 * i:3 * i + 3] = f
    return R


def step_derivatives(robot, contacts, mu=0.8, **build_options):
    """Compiled derivatives of the contact step: ``d.jacobian(q, v, tau, lam, dt, mu, normals,
    modes)`` → StepJacobian; ``p = d.point(...)`` then ``d.jvp(p, q_dot, v_dot, tau_dot)`` and
    ``d.vjp(p, v_next_bar, lam_bar)``.  λ is the step's solution (``contact_step(...).lam``);
    ``build_options``: out_dir, cflags, cc, name."""
    return StepDerivatives(robot, contacts, mu, **build_options)
