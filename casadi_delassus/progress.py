"""Long steps say so, on stderr: ``with step("tracing naive for chain_n300"):`` prints nothing
when the step is quick; once it has run AFTER seconds it prints

    [  5.0 s] tracing naive for chain_n300 ...

and when it ends ``[ 48.2 s] tracing naive for chain_n300: done in 43.2 s`` (times since the
first step of the process; the first line's is the step's start, though it is printed AFTER
seconds later).  A timer thread does the printing, so a Python loop that runs for minutes is
announced on time; a single long C++ call (CasADi's cse or code generation on a huge graph)
holds the GIL and would delay it, so a step known to be big passes ``now=True`` and is
announced when it starts.  ``quiet()`` turns it off (tests of output)."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from .names import printable

AFTER = 5.0
_state = {"t0": None, "on": True}


def _say(text, at=None):
    """``text`` stamped with the time since the first step: now, or ``at`` (a perf_counter time)."""
    print(f"[{(time.perf_counter() if at is None else at) - _state['t0']:6.1f} s] {printable(text)}", file=sys.stderr,
          flush=True)


@contextmanager
def step(what, now=False):
    """Announce ``what`` if it takes longer than AFTER seconds (at once with ``now``)."""
    if _state["t0"] is None:
        _state["t0"] = time.perf_counter()
    if not _state["on"]:
        yield
        return
    t0, said = time.perf_counter(), threading.Event()

    def announce():         # stamped with the step's start, though said AFTER seconds into it
        said.set()
        _say(f"{what} ...", at=t0)

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


def note(text):
    """One line on stderr that the user should read whatever the step timing (what a model
    loader ignored, for example): ``note: <text>``."""
    print(f"note: {text}", file=sys.stderr, flush=True)


def quiet(off=True):
    """Turn progress lines off (``quiet(False)`` turns them back on)."""
    _state["on"] = not off


class Bar:
    """Progress of ``total`` items (modes of a library, jobs of a study) on stderr.  On a
    terminal one line redrawn in place::

        [#########...........]  7/16 modes  21 s, ~27 s left

    elsewhere (a log, a pipe) one plain line per item, with the same counts::

        [  21.3 s] 7/16 modes: m5 built (pv_osim, 1,953 instructions); ~27 s left

    Items counted as ``done`` at the start (taken from the cache) do not enter the estimate
    of the time left (:meth:`eta`).  ``quiet()`` silences it."""

    WIDTH = 20

    def __init__(self, total, what="items", done=0, stream=None):
        self.total, self.what, self.done, self.start = total, what, done, done
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = self._t_last = time.perf_counter()
        if _state["t0"] is None:
            _state["t0"] = self.t0
        self._drawn, self._lock, self._stop = False, threading.Lock(), threading.Event()
        if self.tty and _state["on"]:
            self._draw()
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self):
        """Redraw every second on a terminal: the elapsed time moves while a long item runs."""
        while not self._stop.wait(1.0):
            self._draw()

    def eta(self):
        """Seconds left, or None before the first item of this run has finished: the mean time
        per finished item (as of the last one) times the items to do, less the time since."""
        finished = self.done - self.start
        if finished <= 0:
            return None
        per_item = (self._t_last - self.t0) / finished
        return max(0.0, per_item * (self.total - self.done) - (time.perf_counter() - self._t_last))

    def _counts(self):
        left = self.eta()
        return f"{self.done}/{self.total} {self.what}", "" if left is None or self.done >= self.total else f"~{left:.0f} s left"

    def _draw(self):
        with self._lock:
            filled = self.WIDTH * self.done // max(self.total, 1)
            counts, left = self._counts()
            text = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {counts}  {time.perf_counter() - self.t0:.0f} s" + \
                   (f", {left}" if left else "")
            print(f"\r\x1b[K{text}", end="", file=self.stream, flush=True)
            self._drawn = True

    def say(self, text):
        """A line of its own (a failure, a note), above the bar on a terminal."""
        if not _state["on"]:
            return
        if self.tty:
            with self._lock:
                print("\r\x1b[K" + printable(text), file=self.stream, flush=True)
            self._draw()
        else:
            _say(text)

    def advance(self, note=""):
        """One more item done; ``note`` says which (plain lines only)."""
        self.done += 1
        self._t_last = time.perf_counter()
        if not _state["on"]:
            return
        if self.tty:
            self._draw()
            return
        counts, left = self._counts()
        _say(f"{counts}" + (f": {note}" if note else "") + (f"; {left}" if left else ""))

    def close(self):
        self._stop.set()
        with self._lock:
            if self._drawn and _state["on"]:
                print(file=self.stream, flush=True)
                self._drawn = False
