"""casadi_delassus: Delassus-matrix and constrained-dynamics algorithms traced over CasADi
SX, operation-counted and compiled to robot-specific C.

    import casadi_delassus as cd
    robot = cd.load_robot("talos")
    f = cd.generate(robot, "2F")                        # compiled (algorithm "auto"), cached
    D = f(q)                                            # Λ⁻¹ = J M⁻¹ Jᵀ, numpy (m x m)
    lib = cd.library(robot, "2F+2H")                    # one function per contact set (contact_modes/)
    D = lib(0b0011, q)                                  # both feet active
    s = cd.contact_step(robot, ["left_sole_link", "right_sole_link"], mu=0.8)  # contact/ (solver "auto")
    r = s(q, v, tau, dt=1e-3)                           # r.lam, r.sigma, r.v_next, r.status
"""
from .version import __version__  # noqa: E402

from .api import casadi_function, check, check_precision, constraint_set, generate, links, load  # noqa: E402
from .constraints import ConstraintSet  # noqa: E402
from .errors import (ArtifactError, CompilerError, ConstraintError, DelassusError, DerivativeWarning,  # noqa: E402
                     InputError, ModelError, OutputError)
from .contact_modes import Library, library, load_library  # noqa: E402
from .stepping.contact import ContactStep, contact_step  # noqa: E402
from .mujoco.step import MujocoContactStep, mujoco_contact_step  # noqa: E402
from .mujoco import mujoco_rollout  # noqa: E402
from .simulation.simulate import LinearFeedback, Rollout, pd_controller  # noqa: E402
from .mujoco.simulate import simulate  # noqa: E402  (Pinocchio-layout robots: simulation/simulate.py; MJCF: mujoco/)
from .simulation.simulate import place_robot as place  # noqa: E402
from .model import Robot, load_robot  # noqa: E402

__all__ = ["load_robot", "generate", "load", "links", "check", "check_precision", "casadi_function", "constraint_set", "ConstraintSet",
           "Robot", "library", "load_library", "Library", "contact_step", "ContactStep", "mujoco_contact_step", "MujocoContactStep", "mujoco_rollout", "simulate", "place", "pd_controller",
           "LinearFeedback", "Rollout",
           "DelassusError", "ModelError", "ConstraintError", "InputError", "CompilerError", "OutputError",
           "ArtifactError", "DerivativeWarning", "__version__"]
