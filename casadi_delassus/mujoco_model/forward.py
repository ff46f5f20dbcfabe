"""A NumPy forward pass of one MjModel (MuJoCo's mj_forward without collision detection): the
smooth SX pieces (smooth.py) and the constraint rows (constraints.py) evaluated through their
casadi.Functions, then the reference solve (solver.py).  Contacts come from a provider
(``contacts(qpos)`` -> list of constraints.Contact): MuJoCo's own collision detection in the
tests, collision.py's candidates later."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constraints import EfcFunction
from .smooth import Smooth, smooth_function
from .solver import Problem, solve


@dataclass
class Forward:
    """One forward pass's results, MuJoCo's mjData names."""
    qacc: np.ndarray
    qacc_smooth: np.ndarray
    qfrc_smooth: np.ndarray
    qfrc_constraint: np.ndarray
    M: np.ndarray
    actuator_force: np.ndarray
    efc: dict
    efc_force: np.ndarray
    contacts: list
    status: str
    iterations: int


class ForwardModel:
    """The NumPy forward of a MujocoModel (smooth.py): ``forward(qpos, qvel, ctrl, qfrc_applied, contacts)``."""

    def __init__(self, model):
        self.model, self.m = model, model.m
        self.smooth = smooth_function(model)
        self._efc = {}

    def efc_function(self, contacts):
        """The EfcFunction for contacts shaped like ``contacts`` (built once per shape)."""
        key = tuple(c.static() for c in contacts)
        if key not in self._efc:
            self._efc[key] = EfcFunction(self.m, contacts)
        return self._efc[key]

    def forward(self, qpos, qvel, ctrl=None, qfrc_applied=None, contacts=(), qacc_warm=None, tol=1e-13):
        """The Forward at (qpos, qvel, ctrl, qfrc_applied) with ``contacts`` (a list of Contact)."""
        m = self.m
        ctrl = np.zeros(m.nu) if ctrl is None else np.asarray(ctrl, float)
        qfrc_applied = np.zeros(m.nv) if qfrc_applied is None else np.asarray(qfrc_applied, float)
        out = dict(zip(Smooth.__dataclass_fields__, (np.array(x) for x in self.smooth(qpos, qvel, ctrl, qfrc_applied))))
        efc = self.efc_function(contacts)(qpos, qvel, contacts)
        a0 = out["qacc_smooth"].ravel()
        problem = Problem.of(out["M"], a0, efc, [c.friction for c in contacts])
        sol = solve(problem, qacc_warm, tol=tol)
        return Forward(sol.qacc, a0, out["qfrc_smooth"].ravel(), problem.J.T @ sol.force, out["M"],
                       out["actuator_force"].ravel(), efc, sol.force, list(contacts), sol.status, sol.iterations)
