"""MuJoCo's users' entry points on generated C: ``mujoco_contact_step`` (step.py: MuJoCo's soft contact problem of
an MjModel's robot on the compiled contact step; mujoco_model/soft_step.py the mathematics, codegen/mujoco_step.py the C,
runtime/mujoco_step.py the call) and ``mujoco_rollout`` (rollout.py), the call, arguments and
arrays of ``mujoco.rollout.rollout`` with the trajectories computed by C generated for that MjModel
(codegen/mujoco_rollout.py from mujoco_model/rollout_parts.py, loaded by runtime/mujoco_rollout.py).
It owns the user-facing checks (one-line InputError or ModelError), the per-model cache in the process
and the mapping of MuJoCo's arrays onto the compiled call; the physics lives in mujoco_model/ and the C
in codegen/.  docs/mujoco.md has what is supported, refused, measured."""
from .rollout import mujoco_rollout
from .step import MujocoContactStep, mujoco_contact_step

__all__ = ["mujoco_rollout", "mujoco_contact_step", "MujocoContactStep"]
