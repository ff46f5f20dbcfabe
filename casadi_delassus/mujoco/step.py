"""``cd.mujoco_contact_step`` and ``cd.MujocoContactStep``: MuJoCo's soft contact problem for an MjModel's robot on
the compiled step (mujoco_model/soft_step.py has the mathematics, codegen/mujoco_step.py the C and its build,
runtime/mujoco_step.py the loading and the call)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..codegen.contact_step import DEFAULT_OUT
from ..codegen.mujoco_step import build
from ..constraints import ConstraintSet
from ..errors import InputError
from ..model.mjcf import _model_name as model_name, mujoco_module, robot_from_mjmodel
from ..registry import AUTO
from ..runtime.mujoco_step import LoadedSoftStep


class MujocoContactStep(LoadedSoftStep):
    """A compiled step solving MuJoCo's soft contact problem for one robot and contact set
    (``mujoco_contact_step``)."""

    def __init__(self, model, contacts, out_dir=DEFAULT_OUT, cflags=("-O2",), cc=None, delassus=AUTO, name=None):
        if not isinstance(model, mujoco_module().MjModel):
            raise InputError(f"model: expected a mujoco.MjModel, got {type(model).__name__}")
        robot = robot_from_mjmodel(model, name or model_name(model) or "mjcf")
        contacts = ConstraintSet.parse(robot, list(contacts))
        super().__init__(build(robot, contacts, out_dir, tuple(cflags), cc, delassus), robot, contacts)


def mujoco_contact_step(model: Any, contacts: Sequence[str], **build_options: Any) -> MujocoContactStep:
    """A compiled step for the robot of the MjModel ``model`` (its gravity and armature) and
    ``contacts`` (specs, e.g. ``mujoco_contacts(model, data).specs``): ``s.solve(model, data)``
    → SoftResult with MuJoCo's contact ``efc_force`` and ``qacc``.  ``build_options``: out_dir,
    cflags, cc, delassus, name (default: the model's <mujoco model>)."""
    return MujocoContactStep(model, contacts, **build_options)
