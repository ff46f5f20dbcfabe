"""The oracles ``check`` compares generated functions with: a small registry, name → Oracle.

An Oracle says whether it can judge a robot (``unavailable``: None, or why not), whether
``check`` asks it by default (``default_for``), and opens a ``session(robot, constraints)``
with, per sample of inputs x ({"q", "K": {input: K}, vectors…}):

    prepare(x) -> x          adjust inputs it must choose (Pinocchio's hard dynamics: k)
    expected(name, x)        its value of output ``name``, or NotApplicable(reason)
    delassus(x)              its J M⁻¹ Jᵀ, for the condition number of the tolerance rule
    notes                    what the session compares against (e.g. which parse of the model)

verify/check.py's ``compare`` runs the samples with the one tolerance rule.

- ``numpy``: the NumPy reference (reference.py), our own parse of the model.
- ``pinocchio``: Pinocchio's own model of the same file (pinocchio_oracle.py; URDF files and
  texts: ``buildModelFromUrdf``/``buildModelFromXML``; other formats: the model built from our
  parse, which does not catch parse differences — its notes say so).
- ``mujoco``: to come with the MJCF loader (``register`` it here).
"""
from __future__ import annotations

import importlib.util

from ..errors import DelassusError, unknown_name
from .check import NotApplicable, NumpySession


class Oracle:
    name = ""
    title = ""          # the name in messages
    summary = ""
    needs = None        # (module, what it takes to install it) for an oracle built on another package

    def unavailable(self, robot):
        """None when this oracle can judge ``robot``, else a one-line reason."""
        if self.needs and importlib.util.find_spec(self.needs[0]) is None:
            return f"the {self.title} oracle needs {self.needs[1]}"
        return None

    def default_for(self, robot):
        """Whether ``check`` asks this oracle when no --oracle is given."""
        return self.unavailable(robot) is None

    def session(self, robot, constraints):
        raise NotImplementedError


class NumpyOracle(Oracle):
    name = "numpy"
    summary = "the NumPy reference (dense CRBA, Jacobians and solves; our parse of the model)"

    def session(self, robot, constraints):
        return NumpySession(robot, constraints)


class PinocchioOracle(Oracle):
    name = "pinocchio"
    summary = ("Pinocchio (pin): its own parse of a URDF (file or text), computeDelassusMatrix, constraintDynamics, "
               "aba, rnea, frame Jacobians; other formats through a model built from our parse")
    title = "Pinocchio"
    DEFAULT_FORMATS = ("urdf", "sdf", "spatial_v2")
    needs = ("pinocchio", "the 'pin' package (pip install pin, or the test extra)")

    def unavailable(self, robot):
        from .pinocchio_oracle import unsupported
        return super().unavailable(robot) or unsupported(robot)

    def default_for(self, robot):
        return getattr(robot, "model_format", None) in self.DEFAULT_FORMATS and self.unavailable(robot) is None

    def session(self, robot, constraints):
        from .pinocchio_oracle import PinocchioSession
        return PinocchioSession(robot, constraints)


class MujocoOracle(Oracle):
    name = "mujoco"
    summary = ("MuJoCo (mujoco): its own compile of the MJCF file or text; mj_fullM, mj_jac, mj_jacDot, "
               "mj_forward, mj_inverse")
    title = "MuJoCo"
    needs = ("mujoco", "the 'mujoco' package (pip install 'casadi_delassus[mjcf]')")

    def unavailable(self, robot):
        not_mjcf = getattr(robot, "model_format", None) != "mjcf"
        return super().unavailable(robot) or (
            "MuJoCo judges models read from MJCF (a .xml <mujoco> file or text) only" if not_mjcf else None)

    def session(self, robot, constraints):
        from .mujoco_oracle import MujocoSession
        return MujocoSession(robot, constraints, not_applicable=NotApplicable)


ORACLES = {}


def register(oracle):
    """Add an Oracle to the registry ``check --oracle`` chooses from."""
    ORACLES[oracle.name] = oracle
    return oracle


register(NumpyOracle())
register(PinocchioOracle())
register(MujocoOracle())


def get_oracle(name):
    if name not in ORACLES:
        raise DelassusError(unknown_name("oracle", name, ORACLES) + f" (the oracles: {', '.join(ORACLES)})")
    return ORACLES[name]


def oracle_names(given, robot):
    """The oracles to ask: ``given`` (names, each possibly a comma list) or, when empty, every
    oracle whose ``default_for(robot)`` holds.  An oracle asked for by name that cannot judge
    this robot is a DelassusError with its reason."""
    names = [n.strip() for g in given for n in g.split(",") if n.strip()]
    if not names:
        return [n for n, o in ORACLES.items() if o.default_for(robot)]
    out = []
    for n in names:
        reason = get_oracle(n).unavailable(robot)
        if reason:
            raise DelassusError(f"oracle {n!r} cannot check robot {robot.name!r}: {reason}")
        if n not in out:
            out.append(n)
    return out


__all__ = ["Oracle", "ORACLES", "register", "get_oracle", "oracle_names", "NotApplicable"]
