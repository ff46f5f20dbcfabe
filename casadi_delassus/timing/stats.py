"""Per-call timings of repeated runs (median, min, max, quartiles) and the protocol of the
timing programs: a run is one process that prints ``ns <per-call ns>`` per repetition and
``out <values>`` (the first output for the first input set)."""
from __future__ import annotations

import statistics
import subprocess
from dataclasses import dataclass, field

import numpy as np

from ..errors import CompilerError, DelassusError

DEFAULT_CALLS = 10_000


DEFAULT_REPS = 5


DEFAULT_SAMPLES = 64


@dataclass
class Timing:
    """Per-call nanoseconds of each repetition of ``calls`` calls over ``samples`` inputs."""
    label: str
    method: str
    ns: list = field(default_factory=list)
    calls: int = 0
    samples: int = 0
    output: np.ndarray | None = None    # first output for input sample 0 (flattened, column-major)
    overhead_ns: float | None = None    # subtracted binding overhead (Python timing only)

    @property
    def median(self):
        return statistics.median(self.ns)

    @property
    def min(self):
        return min(self.ns)

    @property
    def max(self):
        return max(self.ns)

    @property
    def iqr(self):
        q1, _, q3 = np.percentile(self.ns, [25, 50, 75])
        return float(q1), float(q3)

    def extend(self, other):
        self.ns += other.ns
        self.calls, self.samples = other.calls, other.samples
        if self.output is None:
            self.output = other.output
        if other.overhead_ns is not None:
            self.overhead_ns = other.overhead_ns
        return self


def compile_harness(cmd, what, cc):
    """Run the compiler command line ``cmd`` (of the compiler ``cc``) that builds ``what``; CompilerError (one line)
    when it cannot run or fails."""
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    except OSError as exc:
        raise CompilerError(f"cannot run C compiler {cc}: {exc}") from None
    if proc.returncode != 0:
        raise CompilerError(f"compiling {what} failed: {proc.stderr.strip()[:400]}")


def run_harness(cmd, what, timeout=None):
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DelassusError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        raise DelassusError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def parse_timings(stdout):
    ns = [float(l.split()[1]) for l in stdout.splitlines() if l.startswith("ns ")]
    out = next((np.array([float(v) for v in l.split()[1:]]) for l in stdout.splitlines() if l.startswith("out")), None)
    if not ns or any(not np.isfinite(t) or t <= 0 for t in ns):
        raise DelassusError(f"timing harness printed no valid timings: {stdout[:300]!r}")
    return ns, out


def default_warmup(calls, samples):
    return max(min(calls, 2000), samples)
