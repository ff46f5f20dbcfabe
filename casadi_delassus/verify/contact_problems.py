"""The three frictional-contact problems of issue 25, built with Pinocchio (the oracle) exactly
as the issue states them, and Pinocchio 4.1's own ADMM / PGS solves of them.

- go1_stand: go1, SRDF ``standing`` pose, identity base orientation, base lowered until the
  lowest foot-sphere bottom touches z = 0; four world-aligned point contacts; μ = 0.8; v = 0;
  τ = the balancing torque (f_eq: least squares J_baseᵀ f = nle_base; τ = nle − Jᵀ f_eq, base
  rows 0).  Exact answer λ* = dt f_eq.
- go1_slide: as go1_stand with μ = 0.1, base velocity 0.5 m/s along x, τ₀ += 0.2 m g.
- talos_stand: talos_full_v2, SRDF ``half_sitting``, lowered onto its lowest sole corner,
  the eight sole corners (±0.1, ±0.05, 0) as contacts, μ = 0.8, v = 0, balancing torque.

Rows are [x, y, z] of each point (LOCAL_WORLD_ALIGNED), i.e. [t₁, t₂, n] for the ground plane.
"""
from __future__ import annotations

import functools
import importlib.metadata
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

GRAVITY = 9.81
FOOT = (-0.0173782, 0.0, -0.0098993)
SOLE_CORNERS = ((0.1, 0.05, 0.0), (0.1, -0.05, 0.0), (-0.1, 0.05, 0.0), (-0.1, -0.05, 0.0))
ROBOTS = {"go1": ("go1_description/urdf/go1.urdf", "go1_description/srdf/go1.srdf", "standing"),
          "talos": ("talos_data/robots/talos_full_v2.urdf", "talos_data/srdf/talos.srdf", "half_sitting")}


def _robots_dir():
    """example-robot-data's robots/ folder, found without importing the package."""
    return Path(importlib.metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots"))


def spec(link, point):
    """Our constraint spec of a world-aligned point contact."""
    return f"{link}:3d-world@{','.join(repr(float(x)) for x in point)}"


@dataclass
class Problem:
    """One contact problem: the state, the contacts, and G, g from Pinocchio."""
    name: str
    robot: str
    specs: list
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    mu: np.ndarray
    dt: float
    G: np.ndarray = field(repr=False)
    g: np.ndarray = field(repr=False)
    J: np.ndarray = field(repr=False)
    f_eq: np.ndarray = field(repr=False)
    mass: float = 0.0
    model: object = field(default=None, repr=False)
    frames: list = field(default_factory=list, repr=False)


CONTACTS = {"go1": [(f"{leg}_foot", FOOT) for leg in ("FL", "FR", "RL", "RR")],
            "talos": [(f"{side}_sole_link", c) for side in ("left", "right") for c in SOLE_CORNERS]}


def _model(robot):
    """(Pinocchio model with one frame per contact point, those frames, the SRDF pose with identity base orientation)."""
    import pinocchio as pin
    urdf, srdf, pose = ROBOTS[robot]
    model = pin.buildModelFromUrdf(str(_robots_dir() / urdf), pin.JointModelFreeFlyer())
    pin.loadReferenceConfigurations(model, str(_robots_dir() / srdf), False)
    frames = []
    for k, (link, point) in enumerate(CONTACTS[robot]):
        parent = model.frames[model.getFrameId(link)]
        placement = parent.placement * pin.SE3(np.eye(3), np.array(point))
        frames.append(model.addFrame(pin.Frame(f"contact_{k}", parent.parentJoint, placement, pin.FrameType.OP_FRAME)))
    q = model.referenceConfigurations[pose].copy()
    q[3:7] = (0.0, 0.0, 0.0, 1.0)
    return model, frames, q


def _jacobian(model, data, frames, q):
    """The stacked LOCAL_WORLD_ALIGNED point Jacobians of the contact frames (3 rows each)."""
    import pinocchio as pin
    pin.computeJointJacobians(model, data, q)
    pin.updateFramePlacements(model, data)
    return np.vstack([pin.getFrameJacobian(model, data, f, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3]
                      for f in frames])


def delassus_and_free_velocity(model, frames, q, v, tau, dt):
    """(G = J M⁻¹ Jᵀ, g = J v_free, J, v_free) from Pinocchio's crba, aba and LWA Jacobians."""
    import pinocchio as pin
    data = model.createData()
    J = _jacobian(model, data, frames, q)
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    v_free = v + dt * pin.aba(model, data, q, v, tau)
    return J @ np.linalg.solve(M, J.T), J @ v_free, J, v_free


def build(name, dt=1e-3):
    """The named problem (go1_stand, go1_slide, talos_stand)."""
    import pinocchio as pin
    robot = name.split("_")[0]
    model, frames, q = _model(robot)
    data = model.createData()
    pin.framesForwardKinematics(model, data, q)
    q[2] -= min(data.oMf[f].translation[2] for f in frames)
    J = _jacobian(model, data, frames, q)
    nle = pin.rnea(model, data, q, np.zeros(model.nv), np.zeros(model.nv))
    f_eq = np.linalg.lstsq(J[:, :6].T, nle[:6], rcond=None)[0]
    tau = nle - J.T @ f_eq
    tau[:6] = 0.0
    v = np.zeros(model.nv)
    mass = sum(i.mass for i in model.inertias)
    mu = 0.8
    if name == "go1_slide":
        mu, v[0] = 0.1, 0.5
        tau[0] += 0.2 * mass * GRAVITY
    G, g, J, _ = delassus_and_free_velocity(model, frames, q, v, tau, dt)
    specs = [spec(link, p) for link, p in CONTACTS[robot]]
    return Problem(name, robot, specs, q, v, tau, np.full(len(frames), mu), dt, G, g, J, f_eq, mass, model, frames)


@functools.lru_cache(maxsize=1)
def _sample_model():
    """Any model: the point contacts a solve on a given G takes only carry its friction."""
    import pinocchio as pin
    return pin.buildSampleModelManipulator()


PROBLEMS = ("go1_stand", "go1_slide", "talos_stand")


def pinocchio_solve(problem_or_G, g=None, mu=None, solver="admm", exact=True, tol=1e-12, max_iter=10_000):
    """Pinocchio 4.1's ADMMConstraintSolver / PGSConstraintSolver on (G, g, μ) (point contacts
    whose friction is μ; their placement does not enter a solve on a given G).  Returns
    (λ, σ, iterations, converged)."""
    import pinocchio as pin
    G, g, mu = (problem_or_G.G, problem_or_G.g, problem_or_G.mu) if g is None else (problem_or_G, g, mu)
    model = _sample_model()
    models = pin.StdVec_ConstraintModel()
    for m_i in np.asarray(mu, dtype=float):
        c = pin.PointContactConstraintModel(model, 0, pin.SE3.Identity(), 1, pin.SE3.Identity())
        c.setFriction(float(m_i))
        models.append(c)
    datas = pin.StdVec_ConstraintData()
    for c in models:
        datas.append(c.createData())
    n = len(g)
    settings = pin.ADMMSolverSettings() if solver == "admm" else pin.PGSSolverSettings()
    for attr in ("absolute_feasibility_tol", "absolute_complementarity_tol"):
        setattr(settings, attr, tol)
    for attr in ("relative_feasibility_tol", "relative_complementarity_tol"):
        setattr(settings, attr, 0.0)
    settings.max_iterations, settings.solve_ncp = max_iter, exact
    result = pin.ADMMSolverResult() if solver == "admm" else pin.PGSSolverResult()
    s = pin.ADMMConstraintSolver(n) if solver == "admm" else pin.PGSConstraintSolver(n)
    s.solve(pin.DelassusOperatorDense(np.asarray(G, dtype=float)), np.asarray(g, dtype=float), models, datas,
            settings, result)
    lam = np.array(result.retrieveConstraintImpulses()).ravel()
    return lam, np.asarray(G) @ lam + g, int(result.iterations), bool(result.converged)
