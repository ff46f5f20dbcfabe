"""Named passes: every algorithm marks the end of each of its sweeps with ``done(name, *values)``,
the SX quantities that sweep computed (SX, lists, tuples and dicts of them).  Nothing happens
unless a caller is recording (``with recording() as passes``: a list of (name, values)), so the
traced functions are the same either way; counting what each pass adds is the caller's
(opcount.pass_counts, bench/pv_sweep_counts.py, bench/dynamics_counts.py)."""
from __future__ import annotations

import contextlib
import contextvars

_RECORDING = contextvars.ContextVar("casadi_delassus_passes", default=None)


def done(name, *values):
    """The pass ``name`` computed ``values`` (recorded only inside ``recording()``)."""
    passes = _RECORDING.get()
    if passes is not None:
        passes.append((name, values))


@contextlib.contextmanager
def recording():
    """Collect the passes the algorithms run inside the block, in order."""
    passes = []
    token = _RECORDING.set(passes)
    try:
        yield passes
    finally:
        _RECORDING.reset(token)
