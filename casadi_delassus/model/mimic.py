"""Mimic joints coupled as Pinocchio 4's ``buildModelFromUrdf(..., mimic=True)`` couples them: a
URDF ``<mimic>`` joint carries no coordinate of its own, q_j = multiplier · q_ref + offset and
v_j = multiplier · v_ref.  The coupled robot's q and v are the full ones without the mimic
joints' entries, in the same order (Pinocchio's mimic model); the full ones are
q = A q_r + b and v = G v_r (URDF spec, <mimic> element; no paper)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError

COUPLED_KINDS = ("revolute", "prismatic")   # one coordinate, one velocity: a linear map


@dataclass(frozen=True)
class Coupling:
    A: np.ndarray       # nq x nq_r: q = A q_r + b
    b: np.ndarray
    G: np.ndarray       # nv x nv_r: v = G v_r
    free_q: tuple       # the entries of q that q_r keeps, in order

    @property
    def nq(self):
        return self.A.shape[1]

    @property
    def nv(self):
        return self.G.shape[1]

    def reduce(self, q):
        """The coupled coordinates of full configurations ``q`` (nq, or n x nq): the entries of
        the joints that mimic none (robot.random_q's, for the generated function)."""
        return np.asarray(q, float)[..., list(self.free_q)]

    def describe(self):
        """Plain data for the robot's identity (a coupled build never shares files with the uncoupled one)."""
        return [np.round(self.A, 15).tolist(), np.round(self.b, 15).tolist()]


def coupling(robot):
    """The Coupling of ``robot``'s mimic joints (None without any); a ModelError for a mimic the
    linear map cannot express (a joint of another kind, a chain of mimics, an unknown joint)."""
    by_name = {b.joint.name: b for b in robot.bodies}
    mimics = [b for b in robot.bodies if b.joint.mimic]
    if not mimics:
        return None
    for b in mimics:
        ref = by_name.get(b.joint.mimic["joint"])
        if ref is None or ref.joint.mimic or {b.joint.kind, ref.joint.kind} - set(COUPLED_KINDS):
            raise ModelError(f"joint {b.joint.name!r} mimics {b.joint.mimic['joint']!r}: coupling needs both "
                             f"revolute or prismatic and the mimicked joint not a mimic itself")
    free_q = [i for i in range(robot.nq) if i not in {b.q_index for b in mimics}]
    free_v = [i for i in range(robot.nv) if i not in {b.v_index for b in mimics}]
    A, b_, G = np.zeros((robot.nq, len(free_q))), np.zeros(robot.nq), np.zeros((robot.nv, len(free_v)))
    A[free_q, range(len(free_q))] = 1.0
    G[free_v, range(len(free_v))] = 1.0
    for b in mimics:
        ref, mult = by_name[b.joint.mimic["joint"]], float(b.joint.mimic["multiplier"])
        A[b.q_index, free_q.index(ref.q_index)] = mult
        b_[b.q_index] = float(b.joint.mimic["offset"])
        G[b.v_index, free_v.index(ref.v_index)] = mult
    return Coupling(A, b_, G, tuple(free_q))
