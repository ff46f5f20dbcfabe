"""The numbers a user passes to a generated function, checked before they reach the C code.

``as_input(spec, value, manifest)`` turns one input (q, a vector, a runtime K) into the flat,
column-major float64 array the C function reads, or raises an InputError with one line that
names the input: not real numbers (complex, datetime, strings, objects), the wrong shape,
NaN or inf anywhere, a non-positive weight R.

Unit quaternions and (cos, sin) pairs.  A free or ball joint's orientation (a quaternion in
the joint's order, the manifest's q layout: Pinocchio's x, y, z, w or MuJoCo's w, x, y, z) and
a continuous joint's (cos, sin) enter the generated code as they are: a
quaternion scaled by 3 scales every rotation entry by 9 (the dynamics outputs moved by a
factor of 32).  Within UNIT_TOL of norm 1 they are normalised (float32 round-off, integrators
that drift); further off they are rejected, since such a q is almost surely laid out wrongly
and silently normalising would hide that.

Precision.  A function generated in single precision (manifest ``precision``) reads float32:
its inputs are converted to float32 as ``np.float32(x)`` rounds them (then checked: a value
beyond float32's range becomes inf and is refused), and its unit blocks are normalised in
float32, as its batched code does.
"""
from __future__ import annotations


import numpy as np

from ..errors import InputError
from ..model.robot import unit_blocks

# |‖quaternion‖ − 1| (or |‖(cos, sin)‖ − 1|) normalised silently; above, an InputError
UNIT_TOL = 1e-6
_REAL_KINDS = "biuf"          # bool, int, unsigned, float: what converts to float64 exactly
DTYPES = {"double": np.float64, "single": np.float32}


def real_dtype(manifest):
    """The numpy type a generated function reads and writes: float64, float32 in single precision."""
    return np.dtype(DTYPES[manifest.get("precision", {}).get("type", "double")])


def refuse_masked(name, value):
    """An InputError for a numpy masked array: the C code would read the values under the mask."""
    if isinstance(value, np.ma.MaskedArray):
        raise InputError(f"input {name} is a masked array, whose mask the generated code cannot honour: pass "
                         f"the rows or entries you mean as a plain array (e.g. {name}.filled(...) or {name}.compressed())")


def real_array(name, value, dtype=np.float64):
    """``value`` as an array of ``dtype`` when it holds real numbers (bool, integers, floats; any shape), else an
    InputError naming ``name``: masked arrays, ragged lists, complex numbers (their imaginary part would be dropped),
    strings, objects."""
    refuse_masked(name, value)
    try:
        a = np.asarray(value)
    except ValueError as exc:                # ragged nested lists
        raise InputError(f"input {name} is not an array of numbers: {str(exc).splitlines()[0]}") from None
    if a.dtype.kind not in _REAL_KINDS:
        raise InputError(f"input {name} must hold real numbers, got dtype {a.dtype} "
                         f"({'complex' if a.dtype.kind == 'c' else 'not numbers'})")
    return a.astype(dtype)


def unit_q(q, layout, name="q"):
    """``q`` (one configuration, or a batch of them as rows) with its unit blocks (``unit_blocks`` of the q
    ``layout``: quaternions, (cos, sin) pairs) normalised where within UNIT_TOL of norm 1, as a new array; an
    InputError naming the first block further off (or not finite).  The one rule for every q a user hands in: the
    generated functions' inputs, the contact step and its batch, its derivatives, the rollouts' q0, MuJoCo's step
    (runtime/door.c applies it in C on its fast path)."""
    q = np.array(q, copy=True)
    rows = q.reshape(-1, q.shape[-1]) if q.ndim else q.reshape(1, -1)
    blocks = list(unit_blocks(layout))
    width = max((sl.stop for _, sl, _ in blocks), default=0)
    if rows.shape[1] < width:
        raise InputError(f"{name}: expected rows of at least {width} entries (its quaternions and (cos, sin) pairs), "
                         f"got shape {q.shape}")
    for joint, sl, what in blocks:
        # the sum of squares in order and one square root, as runtime/door.c computes it
        # (not sum(), which compensates from Python 3.12 on), in q's own type
        sq = np.zeros(len(rows), dtype=q.dtype)
        for k in range(sl.start, sl.stop):
            sq += rows[:, k] * rows[:, k]
        norm = np.sqrt(sq)
        bad = np.flatnonzero(~(np.abs(norm - 1.0) <= UNIT_TOL))
        if bad.size:
            where = f"row {bad[0]} of {name}: " if q.ndim > 1 else ""
            raise InputError(f"{where}q[{sl.start}:{sl.stop}], the {what} of joint {joint!r}, has norm "
                             f"{norm[bad[0]]:.6g}, not 1 (within {UNIT_TOL:g}): normalise it, or check the q layout")
        rows[:, sl] /= norm[:, None]
    return q


def as_input(spec, value, manifest):
    """``value`` for the input ``spec`` ({"name", "shape"} of the manifest) as the flat,
    column-major float64 (float32) array the C code reads (see the module docstring)."""
    name, shape = spec["name"], tuple(spec["shape"])
    a = real_array(name, value, real_dtype(manifest))
    if len(shape) == 1:                      # vectors: any shape with the right number of entries
        a = a.reshape(-1)
    if name == "q" and a.size != manifest["nq"]:
        raise InputError(f"q has {a.size} entries, robot {manifest['robot']!r} needs nq = {manifest['nq']}")
    if a.shape != shape:
        raise InputError(f"input {name} has shape {a.shape}, expected {shape}")
    return checked_values(name, a, manifest).reshape(-1, order="F")


def checked_values(name, a, manifest):
    """The real array ``a`` of input ``name`` (one instance, or a batch of them first) after the checks of the
    numbers themselves: finite, R > 0, q's unit blocks by ``unit_q``; else an InputError."""
    bad = np.flatnonzero(~np.isfinite(a.reshape(-1)))
    if bad.size:
        raise InputError(f"input {name} has {bad.size} non-finite entr{'y' if bad.size == 1 else 'ies'} "
                         f"(first: flat index {bad[0]}, value {a.reshape(-1)[bad[0]]})")
    if name == "R" and not np.all(a > 0):
        raise InputError(f"input R must be positive, got {a.min():g} at flat index {int(np.argmin(a))}")
    return unit_q(a, manifest.get("q_layout", ())) if name == "q" else a


def out_array(name, shape, given, fortran=False, dtype=np.float64):
    """``given`` when it can receive the output ``name`` of ``shape``: a writeable, aligned
    numpy array of ``dtype`` of exactly that shape, C-contiguous (or Fortran-contiguous where
    ``fortran``); else an InputError."""
    dtype = np.dtype(dtype)
    if isinstance(given, np.ndarray) and given.dtype == dtype and given.shape == shape and \
            given.flags.writeable and given.flags.aligned and \
            (given.flags.c_contiguous or (fortran and given.flags.f_contiguous)):
        return given
    got = f"{given.dtype} {given.shape}" if isinstance(given, np.ndarray) else type(given).__name__
    order = "C- or Fortran-contiguous" if fortran else "C-contiguous"
    raise InputError(f"out for {name} must be a writeable {order} {dtype} array of shape {shape}, got {got}"
                     + (" (not writeable)" if isinstance(given, np.ndarray) and not given.flags.writeable else ""))
