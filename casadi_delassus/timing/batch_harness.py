"""Runtime of the batched entry point (``<fn>_batch``, codegen/vectorise.py), measured in C.

``BatchHarness`` renders ``timing/templates/batch_timing.c.j2`` for one generated function,
compiles it (it dlopen()s the function's .so, as c_harness.py's single-call harness does), writes
n instances of each input (batch first, row-major per instance) and times repetitions in
which ``threads`` pthreads, each bound to one of the CPUs the process may use, evaluate
lane-aligned shares of the batch ``calls`` times; the result is nanoseconds per instance
(wall clock), comparable with c_harness.py's per-call nanoseconds of the single call.  With
``outputs=False`` every output pointer is NULL: the batch computes but does not move its
results out of the vector lanes, which prices that step by difference.
"""
from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import numpy as np

from ..version import __version__
from ..codegen.vectorise import io_layout
from ..codegen.build import find_compiler
from .c_harness import _manifest, _robot_and_constraints, random_samples
from .render import ENV
from .stats import DEFAULT_REPS, Timing, compile_harness, parse_timings, run_harness

HARNESS_CFLAGS = ("-O2", "-pthread")


def batch_inputs(manifest, sets, n, seed=0):
    """{name: (n, *shape) array}: the input sets repeated to n instances; inputs a set lacks
    (v, τ, R, …) drawn from a seeded generator as timing.pack_inputs does."""
    rng = np.random.default_rng(seed + 1)
    out = {}
    for spec in manifest["inputs"]:
        shape = tuple(spec["shape"])
        rows = []
        for x in sets:
            if spec["name"] in x:
                rows.append(np.asarray(x[spec["name"]], dtype=float).reshape(shape))
            else:
                rows.append(rng.uniform(0.1, 1.0, shape) if spec["name"] == "R" else rng.normal(size=shape))
        out[spec["name"]] = np.ascontiguousarray(np.resize(np.array(rows), (n, *shape)))
    return out


class BatchHarness:
    """The compiled batch timing program of one generated function and its input file; call
    ``run(reps)`` as often as wanted (one process each: warm-up, then ``reps``)."""

    def __init__(self, f, sets=None, n=1024, calls=None, threads=1, samples=64, seed=0, warmup=None, cc=None,
                 label=None, outputs=True):
        self.manifest, manifest_path = _manifest(f)
        self.so_path = manifest_path.with_suffix(".so").resolve()
        if sets is None:
            robot, cs = _robot_and_constraints(f, self.manifest)
            sets = random_samples(robot, cs, samples, seed)
        self.n, self.threads, self.outputs = int(n), int(threads), bool(outputs)
        # about 10,000 instances per thread and repetition unless told
        self.calls = int(calls) if calls else max(1, 10_000 * self.threads // self.n)
        self.warmup = max(1, self.calls // 5) if warmup is None else int(warmup)
        self.label = label or f"{self.manifest['algorithm']} batch x{self.threads}"
        self._tmp = tempfile.TemporaryDirectory(prefix="cd-batch-timing-")
        d = Path(self._tmp.name)
        self.data = d / "inputs.bin"
        values = batch_inputs(self.manifest, sets, self.n, seed)
        np.concatenate([values[s["name"]].reshape(-1) for s in self.manifest["inputs"]]).tofile(self.data)
        src, self.exe = d / "batch_timing.c", d / "batch_timing"
        src.write_text(ENV.get_template("batch_timing.c.j2").render(
            dict(self.manifest, inputs=io_layout(self.manifest["inputs"]), outputs=io_layout(self.manifest["outputs"]),
                 version=__version__)))
        cc = find_compiler(cc)
        compile_harness([*shlex.split(cc), *HARNESS_CFLAGS, "-o", self.exe, src, "-ldl"], "the batch timing harness", cc)

    def run(self, reps=DEFAULT_REPS):
        out = run_harness([self.exe, self.so_path, self.data, self.n, self.calls, reps, self.warmup, self.threads,
                           *([] if self.outputs else ["no-outputs"])],
                   f"timing {self.manifest['function']}_batch")
        ns, first = parse_timings(out)
        return Timing(self.label, f"C batch, {self.threads} thread(s), n = {self.n}", ns, self.calls, self.n, first)

    def close(self):
        self._tmp.cleanup()
