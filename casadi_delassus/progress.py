"""Long steps say so, on stderr: ``with step("tracing naive for chain_n300"):`` prints nothing
when the step is quick; once it has run AFTER seconds it prints

    [  5.0 s] tracing naive for chain_n300 ...

and when it ends ``[ 48.2 s] tracing naive for chain_n300: done in 43.2 s`` (times since the
first step of the process).  A timer thread does the printing, so a Python loop that runs
for minutes is announced on time; a single long C++ call (CasADi's cse or code generation on
a huge graph) holds the GIL and would delay it, so a step known to be big passes
``now=True`` and is announced when it starts.  ``quiet()`` turns it off (tests of output)."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

AFTER = 5.0
_state = {"t0": None, "on": True}


def _say(text):
    print(f"[{time.perf_counter() - _state['t0']:6.1f} s] {text}", file=sys.stderr, flush=True)


@contextmanager
def step(what, now=False):
    """Announce ``what`` if it takes longer than AFTER seconds (at once with ``now``)."""
    if _state["t0"] is None:
        _state["t0"] = time.perf_counter()
    if not _state["on"]:
        yield
        return
    t0, said = time.perf_counter(), threading.Event()

    def announce():
        said.set()
        _say(f"{what} ...")

    timer = threading.Timer(AFTER, announce)
    timer.daemon = True
    if now:
        announce()
    else:
        timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            _say(f"{what}: done in {time.perf_counter() - t0:.1f} s")


def quiet(off=True):
    """Turn progress lines off (``quiet(False)`` turns them back on)."""
    _state["on"] = not off
