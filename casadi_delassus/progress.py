"""Long work says so, on stderr, by one mechanism: a step of unknown length (``with step("tracing
naive for chain_n300"):``) and a count of known items (``Bar(16, "modes")``: modes, samples, steps).

Where stderr is a terminal and tqdm is installed (the extra ``progress``), both are a tqdm bar redrawn in
place, with the phase, the elapsed time and, for a count, the rate and the time left.  Elsewhere (a log, a
pipe, or no tqdm) they are heartbeat lines.  A step prints nothing when it is quick; once it has run AFTER
seconds it prints

    [  5.0 s] tracing naive for chain_n300 ...

and when it ends ``[ 48.2 s] tracing naive for chain_n300: done in 43.2 s`` (times since the
first step of the process; the first line's is the step's start, though it is printed AFTER
seconds later).  A timer thread does the printing, so a Python loop that runs for minutes is
announced on time; a single long C++ call (CasADi's cse or code generation on a huge graph)
holds the GIL and would delay it, so a step known to be big passes ``now=True`` and is
announced when it starts.  ``quiet()``, ``with silenced():`` (the public functions' ``quiet=True``) and
the environment's ``CASADI_DELASSUS_QUIET=1`` turn it all off."""
from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager

from .names import printable

AFTER = 2.0
QUIET_ENV = "CASADI_DELASSUS_QUIET"
_state = {"t0": None, "on": True}


def enabled():
    """Whether progress shows: not turned off by quiet()/silenced() nor by CASADI_DELASSUS_QUIET=1."""
    return _state["on"] and os.environ.get(QUIET_ENV, "").strip() in ("", "0")


def _tqdm(stream):
    """tqdm's bar class where ``stream`` is a terminal and tqdm is installed, else None (heartbeat lines)."""
    if not getattr(stream, "isatty", lambda: False)():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _say(text, at=None):
    """``text`` stamped with the time since the first step: now, or ``at`` (a perf_counter time)."""
    print(f"[{(time.perf_counter() if at is None else at) - _state['t0']:6.1f} s] {printable(text)}", file=sys.stderr,
          flush=True)


@contextmanager
def step(what, now=False):
    """Announce ``what`` if it takes longer than AFTER seconds (at once with ``now``): a bar with the
    elapsed time on a terminal, heartbeat lines elsewhere."""
    if _state["t0"] is None:
        _state["t0"] = time.perf_counter()
    if not enabled():
        yield
        return
    t0, said, bar = time.perf_counter(), threading.Event(), []
    tqdm = _tqdm(sys.stderr)

    def announce():         # stamped with the step's start, though said AFTER seconds into it
        said.set()
        if tqdm is None:
            _say(f"{what} ...", at=t0)
            return
        # delay: no first draw before its clock is set to the step's start (tqdm's clock is time.time)
        bar.append(tqdm(desc=printable(what), bar_format="{desc}: {elapsed}", file=sys.stderr, leave=True, delay=AFTER))
        bar[0].start_t = bar[0].last_print_t = time.time() - (time.perf_counter() - t0)
        bar[0].refresh()
        threading.Thread(target=_refresh, args=(bar[0], said), daemon=True).start()

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
        if not now:
            timer.join()            # an announcement under way finishes first: its bar is then closed here
        if bar:
            said.clear()            # stops the refresh thread
            bar[0].set_description_str(f"{printable(what)}: done")
            bar[0].close()
        elif said.is_set():
            _say(f"{what}: done in {time.perf_counter() - t0:.1f} s")


def _refresh(bar, running, every=1.0):
    """Redraw ``bar`` every second while ``running``: its elapsed time moves during one long call."""
    while running.is_set():
        time.sleep(every)
        if running.is_set():
            bar.refresh()


@contextmanager
def silenced(quiet=True):
    """No progress inside the block when ``quiet`` (the public functions' ``quiet=True``)."""
    was = _state["on"]
    _state["on"] = was and not quiet
    try:
        yield
    finally:
        _state["on"] = was


def note(text):
    """One line on stderr that the user should read whatever the step timing (what a model
    loader ignored, for example): ``note: <text>``."""
    print(f"note: {text}", file=sys.stderr, flush=True)


def quiet(off=True):
    """Turn progress lines off (``quiet(False)`` turns them back on)."""
    _state["on"] = not off


class Bar:
    """Progress of ``total`` items (modes of a library, samples of a check, steps of a rollout) on stderr.  On a
    terminal with tqdm a bar redrawn in place::

        modes:  44%|████▍     | 7/16 [00:21<00:27,  3.0 s/modes]

    elsewhere (a log, a pipe) plain lines with the same counts, one per item::

        [  21.3 s] 7/16 modes: m5 built (pv_osim, 1,953 instructions); ~27 s left

    or with ``heartbeat`` (many quick items: a rollout's steps) one line per AFTER seconds, none when the whole
    count takes less.  Items counted as ``done`` at the start (taken from the cache) do not enter the estimate
    of the time left (:meth:`eta`).  quiet()/silenced()/CASADI_DELASSUS_QUIET=1 silence it."""

    def __init__(self, total, what="items", done=0, stream=None, heartbeat=False):
        self.total, self.what, self.done, self.start = total, what, done, done
        self.stream = stream or sys.stderr
        self.heartbeat = heartbeat
        self.t0 = self._t_last = self._t_said = time.perf_counter()
        if _state["t0"] is None:
            _state["t0"] = self.t0
        tqdm = _tqdm(self.stream) if enabled() else None
        self.tty = tqdm is not None         # a bar drawn in place (workers' own lines would break it)
        self._bar, self._running = None, threading.Event()
        if tqdm is not None:
            self._bar = tqdm(total=total, initial=done, desc=printable(what), unit=printable(what), file=self.stream,
                             delay=AFTER if heartbeat else 0, dynamic_ncols=True)
            self._running.set()
            threading.Thread(target=_refresh, args=(self._bar, self._running), daemon=True).start()

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

    def say(self, text):
        """A line of its own (a failure, a note), above the bar on a terminal."""
        if not enabled():
            return
        if self._bar is not None:
            self._bar.write(printable(text), file=self.stream)
        else:
            _say(text)

    def advance(self, note="", count=1):
        """``count`` more items done; ``note`` says which (plain lines only)."""
        self.done += count
        self._t_last = time.perf_counter()
        if not enabled():
            return
        if self._bar is not None:
            self._bar.update(count)
            return
        if self.heartbeat and self._t_last - self._t_said < AFTER:
            return
        self._t_said = self._t_last
        counts, left = self._counts()
        _say(f"{counts}" + (f": {note}" if note else "") + (f"; {left}" if left else ""))

    def close(self):
        self._running.clear()
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def counted(n, what="items"):
    """range(n), its progress shown by a heartbeat Bar: a loop of many quick items (a rollout's steps)."""
    bar = Bar(n, what, heartbeat=True)
    try:
        for k in range(n):
            yield k
            bar.advance()
    finally:
        bar.close()
