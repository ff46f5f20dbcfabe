"""Derivatives of the contact step (contact/step.py) by implicit differentiation of the solved
problem at its solution: ∂(v_next, λ)/∂(q, v, τ), q in the tangent space (model/integrate.py).  The mathematics is
here (the SX traced once per robot, the modes and the implicit system); the C and its build are
codegen/step_derivatives.py's, the loading and the call runtime/step_derivatives.py's, ``step_derivatives`` the entry
(stepping/derivatives.py).

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

from ..dynamics.aba import aba
from ..errors import InputError
from ..model.integrate import integrate_sx
from ..symbolic.frames import local_transforms
from ..sweeps.joint_space import constraint_jacobian
from .step import minv_apply

KINDS = ("parts", "fwd", "adj")         # the compiled functions, ``<name>_<kind>``
MODES = ("separating", "sticking", "sliding")
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


def checked_modes(modes, sigma):
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


def block_diag(frames):
    """The block-diagonal matrix of the contacts' 3×3 frames."""
    R = np.zeros((3 * len(frames),) * 2)
    for i, f in enumerate(frames):
        R[3 * i:3 * i + 3, 3 * i:3 * i + 3] = f
    return R

