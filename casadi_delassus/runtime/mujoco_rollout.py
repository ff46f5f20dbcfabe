"""The compiled ``cd.mujoco_rollout`` (codegen/mujoco_rollout.py) loaded through ctypes: its sealed .so
opened once (library.open_sealed) and its entry ``<name>_rollout(dims, state0, warm0, control,
state, sensordata, status, warm_out)`` called on checked, C-contiguous float64 arrays (``<name>_forward``: one forward's
rows, forces and contacts, for comparisons with mj_forward)."""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import InputError
from .artifact import BUILT_KINDS
from .library import entries, open_sealed

DOUBLE_P = ctypes.POINTER(ctypes.c_double)
CONVERGED, MAX_ITERATIONS, DIVERGED = 0, 1, 2
STATUS = ("converged", "max iterations", "diverged")        # by code: a trajectory's status, what run() returns
# the C rollout's per-trajectory codes (its enum ST_*, rendered from this by codegen/mujoco_rollout.py)
STATUS_CODES = {"CONVERGED": CONVERGED, "MAX_ITERATIONS": MAX_ITERATIONS, "DIVERGED": DIVERGED}
PROFILE = "-DCD_PROFILE"      # the profiling build's flag (templates/mujoco_rollout.c.j2: seconds per phase)
PHASES = ("forward (CasADi: M, qfrc_smooth, geom poses, base rows)", "smooth qacc (tree LᵀDL of M)",
          "broadphase, candidates (CasADi), selection, row blocks",
          "pair rows, active limits' a_ref and R (CasADi)", "warm start choice", "Newton: residuals, forces, Hessian", "Newton: Cholesky and solve",
          "Newton: line search", "integration", "sensors")
COUNTS = ("forwards", "Newton iterations", "line search slopes", "kept rows", "dense Hessian factors")


def _pointer(x):
    """A double* to the C-contiguous float64 array ``x`` (NULL for None)."""
    return None if x is None else x.ctypes.data_as(DOUBLE_P)


class CompiledRollout:
    """One model's compiled rollout: ``run(state0, warm0, control, nstep, nthread, with_qfrc, warm_out=None)``."""

    def __init__(self, manifest_path):
        self.manifest, self._lib, mapped = open_sealed(manifest_path, BUILT_KINDS, "mjrollout")
        self._run, self._forward, lanes = entries(self._lib, mapped, manifest_path.with_suffix(".so"), self.manifest["function"],
                                           [("_rollout", [DOUBLE_P] * 8), ("_forward", [DOUBLE_P] * 5), ("_lanes", [])])
        self._phases = None
        if PROFILE in self.manifest["cflags"]:
            self._phases, = entries(self._lib, mapped, manifest_path.with_suffix(".so"), self.manifest["function"],
                                    [("_phases", [DOUBLE_P])])
        self.lanes = int(lanes())       # the environments a lane group steps in lockstep (1: one by one)
        self.nstate = 1 + self.manifest["nq"] + self.manifest["nv"]
        self.nsensordata = self.manifest["nsensordata"]

    def run(self, state0, warm0, control, nstep, nthread, with_qfrc, warm_out=None):
        """(states nbatch x nstep x nstate, sensordata nbatch x nstep x nsensordata, status per trajectory: STATUS'
        index) from the checked inputs; ``warm_out`` (C-contiguous nbatch x nv, or None) receives each trajectory's
        last warm start (MuJoCo's qacc_warmstart after its last step: the next call's warm0)."""
        nbatch = len(state0)
        out, sens = np.empty((nbatch, nstep, self.nstate)), np.empty((nbatch, nstep, self.nsensordata))
        status = np.zeros(nbatch)
        dims = np.array([nbatch, nstep, nthread, control.shape[2], float(with_qfrc)], float)
        self._run(*map(_pointer, (dims, state0, warm0, control, out, sens, status, warm_out)))
        if np.any(status < 0):
            raise InputError("mujoco_rollout: out of memory for a thread's work space")
        return out, sens, status.astype(int)

    def forward(self, qpos, qvel, ctrl, warm):
        """One forward at (qpos, qvel, ctrl) from the warm start (for comparisons with mj_forward): {status, qacc,
        kept (the kept rows' indices, MuJoCo's efc order), J, aref, R, force (of the kept rows), on (the kept contact
        slots), dist (per slot), pos and frame (per slot: mesh slots only)}."""
        nv, nrow, nslot = self.manifest["nv"], self.manifest["nrow"], self.manifest["nslot"]
        out = np.zeros(2 + nv + nrow * (nv + 4) + 14 * nslot)
        args = [np.ascontiguousarray(x, dtype=float) for x in (qpos, qvel, ctrl, warm)]
        self._forward(*map(_pointer, (*args, out)))
        if out[0] < 0:
            raise InputError("mujoco_rollout: out of memory for a work space")
        rows = out[2 + nv:2 + nv + nrow * (nv + 4)].reshape(nrow, nv + 4)
        slots = out[2 + nv + nrow * (nv + 4):].reshape(nslot, 14)
        kept = np.flatnonzero(rows[:, 0] > 0.5)
        on = np.flatnonzero(slots[:, 0] > 0.5)
        return dict(status=int(out[0]), qacc=out[2:2 + nv], kept=kept, J=rows[kept, 1:1 + nv], aref=rows[kept, nv + 1],
                    R=rows[kept, nv + 2], force=rows[kept, nv + 3], on=on, dist=slots[:, 1], pos=slots[:, 2:5],
                    frame=slots[:, 5:])

    def phases(self):
        """The profiling build's ({phase: seconds}, {count: number}) summed since the last call (then reset)."""
        out = np.zeros(len(PHASES) + len(COUNTS))
        self._phases(_pointer(out))
        return dict(zip(PHASES, out)), dict(zip(COUNTS, out[len(PHASES):]))
