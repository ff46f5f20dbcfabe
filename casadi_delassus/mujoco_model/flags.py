"""The options of an MjModel this package reads: disable flags by name."""
from __future__ import annotations

from ..model.mjcf import mujoco_module


def disabled(m, name):
    """Whether ``m.opt`` disables ``name`` ("spring", "damper", "gravity", "clampctrl", ...)."""
    return bool(m.opt.disableflags & int(getattr(mujoco_module().mjtDisableBit, f"mjDSBL_{name.upper()}")))


def actuator_disabled(m, i):
    """Whether actuator i's group is disabled by ``opt.disableactuator`` (groups 0 to 30)."""
    group = int(m.actuator_group[i])
    return 0 <= group <= 30 and bool(m.opt.disableactuator & (1 << group))
