"""MuJoCo's soft contact step (codegen/mujoco_step.py) loaded and called: its sealed .so opened once
(library.open_sealed, kind "mjsoft") and ``<name>_soft`` called on checked arrays (one-line InputError: condims,
orthonormal frames, friction, R > 0, finite states, unit quaternions), and ``solve``: MuJoCo's efc_force and qacc for
an MjData's state and contacts."""
from __future__ import annotations

import numpy as np

from ..mujoco_model.soft_contacts import rows_per_contact
from ..mujoco_model.soft_admm import STATUS
from ..mujoco_model.soft_step import SoftResult, contact_blocks, mujoco_contacts, soft_parameters
from ..contact.result import SOFT_DEFAULTS, SOFT_OPTIONS, Options
from ..errors import ConstraintError, InputError
from ..model.mjcf import mujoco_module
from .artifact import BUILT_KINDS
from .contact_step import DOUBLE_P, NORMAL_TOL, c_pointer, check_q, check_state
from .inputs import real_array
from .library import entries, open_sealed


class LoadedSoftStep:
    """The compiled MuJoCo-soft step at the sealed manifest ``path`` (codegen/mujoco_step.py) for ``robot`` and its
    contacts (a ConstraintSet of ``LINK:6d-world`` or fixed points; mujoco/step.py MujocoContactStep builds it)."""

    def __init__(self, path, robot, contacts):
        self.robot, self.contacts = robot, contacts
        self.blocks = contact_blocks(self.contacts)
        self.nc = len(self.blocks)
        self.so = path.with_suffix(".so")
        self.manifest, self._lib, mapped = open_sealed(path, BUILT_KINDS, "mjsoft")
        self._soft, = entries(self._lib, mapped, self.so, self.manifest["function"], [("_soft", [DOUBLE_P] * 15)])

    def _dims(self, dims):
        """condim per contact, checked against its rows: 1 or 3 on a fixed point, 1, 3, 4 or 6 on a 6d-world contact."""
        d = np.ascontiguousarray(real_array("dims", dims), dtype=float).ravel()
        ok = {3: (1, 3), 6: (1, 3, 4, 6)}
        if d.size != self.nc or any(x not in ok[k] for x, k in zip(d, self.blocks)):
            raise InputError(f"dims: expected a condim per contact, 1 or 3 for a fixed point, 1, 3, 4 or 6 for a "
                             f"6d-world contact, got {d.tolist()}"[:300])
        return d

    @staticmethod
    def _warm(force, m):
        """The warm start: m finite forces."""
        return check_state("force_warm", real_array("force_warm", force).ravel(), m)

    def _frames(self, frames):
        """The contacts' frames (n_c × 3 × 3), each with orthonormal rows (to NORMAL_TOL, as the step's normals): a
        zero or scaled frame scales the efc rows, and with them every force."""
        F = check_state("frames", real_array("frames", frames).ravel(), 9 * self.nc).reshape(-1, 3, 3)
        off = np.abs(F @ F.transpose(0, 2, 1) - np.eye(3)).max(axis=(1, 2))
        if np.any(off > NORMAL_TOL):
            raise InputError(f"frames: contact {int(np.argmax(off))}'s frame is not orthonormal (F Fᵀ off the identity "
                             f"by {off.max():.3g} > {NORMAL_TOL:g})")
        return F.ravel()

    @staticmethod
    def _friction(friction, dims):
        """MuJoCo's friction per contact (n_c × 5), each ≥ 0 and those the condim uses (the first condim − 1) > 0, as
        MuJoCo clamps them (a negative μ was read as |μ|; a zero one divides the elliptic cone's rows by 0)."""
        f = check_state("friction", real_array("friction", friction).ravel(), 5 * len(dims)).reshape(-1, 5)
        used = np.arange(5) < (np.asarray(dims)[:, None] - 1)
        if np.any(f < 0) or np.any(f[used] <= 0):
            raise InputError("friction: every coefficient must be >= 0, and those the condim uses (the first "
                             f"condim - 1 of each contact) > 0, got {f.tolist()}"[:300])
        return f.ravel()

    def __call__(self, q, v, tau, frames, friction, dims, offsets, R, B, Kr, pyramidal=False, force_warm=None,
                 tol=SOFT_DEFAULTS.tol, max_iter=SOFT_DEFAULTS.max_iter, rho=SOFT_DEFAULTS.rho):
        """(force, qacc) of MuJoCo's problem at (q, v, τ) = (qpos, qvel, qfrc_applied) for the
        contacts' frames (n_c × 3 × 3, orthonormal rows), friction (n_c × 5), condim, world offsets of the points from
        their body origins (n_c × 3; unused for fixed points) and the per-row R (> 0), B, Kr
        (``soft_parameters``).  ``tol`` (relative, finite and > 0), ``max_iter`` and ``rho`` are checked as the
        contact step's (contact/result.py); q's quaternions as every q (runtime/contact_step.py check_q).  The status is "not finite" whenever a
        force or qacc is (a huge warm start overflows)."""
        dims = self._dims(dims)
        m, r = int(rows_per_contact(dims, pyramidal).sum()), self.robot
        opts = Options(tol, max_iter, rho).packed(SOFT_OPTIONS, pyramidal=bool(pyramidal))
        arrays = [check_q(r, real_array("q", q).ravel())]
        arrays += [check_state(n, real_array(n, x).ravel(), k) for n, x, k in (("v", v, r.nv), ("tau", tau, r.nv))]
        arrays += [self._frames(frames), self._friction(friction, dims), dims,
                   check_state("offsets", real_array("offsets", offsets).ravel(), 3 * self.nc)]
        arrays += [check_state(n, real_array(n, x).ravel(), m) for n, x in (("R", R), ("B", B), ("Kr", Kr))]
        if not np.all(arrays[7] > 0):
            raise InputError(f"R: must be > 0 (MuJoCo's regularisation), got {arrays[7].min():g} at row "
                             f"{int(np.argmin(arrays[7]))}")
        warm = None if force_warm is None else self._warm(force_warm, m)
        qacc, force, info = np.empty(r.nv), np.empty(m), np.empty(4)
        ptr = c_pointer
        if self._soft(*map(ptr, arrays), ptr(warm), ptr(opts), ptr(qacc), ptr(force), ptr(info)):
            raise InputError("the generated MuJoCo contact step failed to evaluate")
        return SoftResult(force, qacc, int(info[0]), (float(info[1]), float(info[2])), STATUS[int(info[3])])

    def solve(self, model, data, **options):
        """MuJoCo's efc_force (contact rows) and qacc for ``data``'s state and contacts, the cone
        of ``model.opt.cone``: the contacts must be the ones this step was built for."""
        contacts = mujoco_contacts(model, data, fixed_points=3 in self.blocks)
        if contacts.specs != self.contacts.specs:
            raise ConstraintError("data.contact differs from the contacts this step was built for")
        pyramidal = model.opt.cone == mujoco_module().mjtCone.mjCONE_PYRAMIDAL
        return self(data.qpos, data.qvel, data.qfrc_applied, contacts.frames, contacts.friction, contacts.dims,
                    contacts.offsets, *soft_parameters(model, contacts, pyramidal), pyramidal=pyramidal, **options)
