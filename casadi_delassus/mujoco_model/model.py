"""One compiled MjModel as this package takes it: checked by features.py (what it uses and this
package does not model is refused by name), with its Robot (model/mjcf.py's robot_from_mjmodel:
q = qpos, v = qvel, MuJoCo's conventions), which the package's CRBA, RNE and ABA read."""
from __future__ import annotations

import contextlib
import io

from ..constraints import ConstraintSet
from ..errors import ModelError
from ..model.mjcf import _model_name, robot_from_mjmodel
from . import features


class MujocoModel:
    """A supported MjModel ``m`` and its Robot."""

    def __init__(self, m, name=None):
        self.name = name or _model_name(m) or "mjcf"
        features.check(m, repr(self.name))
        self.m = m
        try:
            # the loader lists on stderr the equality constraints its 'equality' scenario leaves
            # out; constraints.py models them all, so that note is not this caller's
            with contextlib.redirect_stderr(io.StringIO()):
                self.robot = robot_from_mjmodel(m, self.name)
        except ModelError as exc:
            raise ModelError(f"MuJoCo model {self.name!r}: {exc}") from None
        self.empty = ConstraintSet(self.robot, [], allow_empty=True)

    @property
    def nq(self):
        return self.m.nq

    @property
    def nv(self):
        return self.m.nv

    @property
    def nu(self):
        return self.m.nu
