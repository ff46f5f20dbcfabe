"""Generated C timed in C: ``timing/templates/timing.c.j2`` rendered for one generated function
and compiled; it dlopen()s the separately compiled ``<algo>.so`` (so nothing is inlined into the
loop), reads N prepared input sets from a binary file and prints per-call nanoseconds of R
repetitions, each of ``calls`` calls cycling over the inputs (CLOCK_MONOTONIC)."""
from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

import numpy as np

from .. import api
from ..version import __version__
from ..codegen.build import find_compiler
from ..errors import DelassusError
from ..model import load_robot
from .pinocchio_harnesses import pinocchio_k
from .render import ENV
from .stats import (DEFAULT_CALLS, DEFAULT_REPS, DEFAULT_SAMPLES, Timing, compile_harness, default_warmup, parse_timings,
                    run_harness)

HARNESS_CFLAGS = ("-O2",)


# compliance given to the soft solvers when they are timed beside the hard problem, so that
# their answer is comparable with constraintDynamics' (PV paper Fig. 3: accurate up to ~1e8)
SOFT_COMPLIANCE = 1e-8


# -- inputs -------------------------------------------------------------------------------
def random_samples(robot, constraints, samples=DEFAULT_SAMPLES, seed=0, dynamics=False):
    """``samples`` input sets {name: array}: a random valid q and, for runtime-input
    constraints, a random K (the values `check` uses).  ``dynamics`` adds random v and τ, the
    k that poses Pinocchio's problem (``pinocchio_k``) and R = SOFT_COMPLIANCE.  Other vector
    inputs are added per function by ``pack_inputs``."""
    rng = np.random.default_rng(seed)
    sets = [{"q": robot.random_q(rng), **constraints.random_inputs(rng)} for _ in range(samples)]
    if dynamics:
        for x in sets:
            x["v"], x["tau"] = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
            x["R"] = np.full(constraints.m, SOFT_COMPLIANCE)
        for x, k in zip(sets, pinocchio_k(robot, constraints, [(x["q"], x["v"]) for x in sets])):
            x["k"] = k
    return sets


def pack_inputs(manifest, sets, seed=0):
    """One float64 array: each set's inputs in manifest order, column-major.  Inputs a set
    lacks (vector inputs v, tau, k, R, lam) are drawn from a seeded generator."""
    rng = np.random.default_rng(seed + 1)
    rows = []
    for x in sets:
        for spec in manifest["inputs"]:
            shape = tuple(spec["shape"])
            if spec["name"] in x:
                a = np.asarray(x[spec["name"]], dtype=float).reshape(shape)
            elif spec["name"] == "R":
                a = rng.uniform(0.1, 1.0, shape)
            else:
                a = rng.normal(size=shape)
            rows.append(a.reshape(-1, order="F"))
    return np.concatenate(rows).astype(np.float64)


def _manifest(f):
    """A function's manifest and its path; a path is loaded (and so verified) first: the
    harness calls the function by the manifest's name."""
    if isinstance(f, (str, Path)):
        f = api.load(f)
    return f.manifest, Path(f.manifest_path)


def _robot_and_constraints(f, manifest):
    robot, cs = getattr(f, "robot", None), getattr(f, "constraints", None)
    if robot is None:
        try:
            robot = load_robot(manifest["robot"])
        except DelassusError:
            robot = load_robot(manifest["source"])
        cs, _ = api.constraint_set(robot, [c["spec"] for c in manifest["constraints"]])
    return robot, cs


# -- generated C --------------------------------------------------------------------------
def render_c_harness(manifest):
    """The C source of the timing program for one manifest."""
    offset, inputs = 0, []
    for spec in manifest["inputs"]:
        size = int(np.prod(spec["shape"]))
        inputs.append(dict(spec, size=size, offset=offset))
        offset += size
    outputs = [dict(o, size=int(np.prod(o["shape"]))) for o in manifest["outputs"]]
    return ENV.get_template("timing.c.j2").render(
        dict(manifest, inputs=inputs, outputs=outputs, sample_size=offset, version=__version__))


class CHarness:
    """The compiled timing program of one generated function and its input file; call
    ``run(reps)`` as often as wanted (each run is one process: warm-up, then ``reps``)."""

    def __init__(self, f, sets=None, samples=DEFAULT_SAMPLES, seed=0, calls=DEFAULT_CALLS, warmup=None,
                 cc=None, work_dir=None, label=None):
        self.manifest, manifest_path = _manifest(f)
        self.so_path = manifest_path.with_suffix(".so").resolve()
        if not self.so_path.is_file():
            raise DelassusError(f"compiled library missing: {self.so_path}")
        if sets is None:
            robot, cs = _robot_and_constraints(f, self.manifest)
            sets = random_samples(robot, cs, samples, seed)
        self.samples, self.calls = len(sets), int(calls)
        self.warmup = default_warmup(self.calls, self.samples) if warmup is None else int(warmup)
        self.label = label or self.manifest["algorithm"]
        self._tmp = None
        if work_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cd-timing-")
            work_dir = self._tmp.name
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        stem = self.manifest["function"]
        self.data = self.dir / f"{stem}.inputs.bin"
        pack_inputs(self.manifest, sets, seed).tofile(self.data)
        src, self.exe = self.dir / f"{stem}.timing.c", self.dir / f"{stem}.timing"
        src.write_text(render_c_harness(self.manifest))
        cc = find_compiler(cc)
        compile_harness([*shlex.split(cc), *HARNESS_CFLAGS, "-o", self.exe, src, "-ldl"], "the timing harness", cc)

    def run(self, reps=DEFAULT_REPS):
        out = run_harness([self.exe, self.so_path, self.data, self.samples, self.calls, reps, self.warmup],
                   f"timing {self.manifest['function']}")
        ns, first = parse_timings(out)
        return Timing(self.label, f"C (dlopen {self.so_path.name})", ns, self.calls, self.samples, first)

    def close(self):
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def time_c(f, sets=None, samples=DEFAULT_SAMPLES, calls=DEFAULT_CALLS, reps=DEFAULT_REPS, warmup=None, seed=0,
           cc=None, work_dir=None):
    """Time a generated function (a CompiledFunction, or the path of its manifest/.so) in C.
    ``sets``: input sets [{name: array}] (default: ``samples`` random ones).  Returns a
    Timing with one per-call ns value per repetition."""
    h = CHarness(f, sets, samples, seed, calls, warmup, cc, work_dir)
    try:
        return h.run(reps)
    finally:
        h.close()
