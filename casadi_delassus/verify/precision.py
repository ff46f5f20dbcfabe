"""What single precision costs: a function's error in float against the same function in
double, measured on random inputs (issue 26).

For one sample, ``relative_error(reference, value)`` is max |value − reference| / max
|reference| over an output's entries (the scale of the output, not entry by entry: entries
that cancel to ~0 in double would otherwise dominate); a function's error at a sample is the
worst over its outputs.  ``measure_bound`` records the largest and the median over SAMPLES
samples of verify/check.random_inputs (the sampler of ``check``), with the seed it used; the
build stores that record in the manifest's ``precision`` entry (codegen/build.py).

The record is a measurement, not a proven bound: ``within_bound`` checks a function on fresh
samples (another seed) against CHECK_FACTOR times it.  Float code that is wrong (a constant
rounded badly, an operation dropped) errs by far more than that (tests/test_precision.py).
The double function compared with is any callable of the same inputs: at build, the traced
SX function evaluated by CasADi (:func:`sx_outputs`); in ``check``, the compiled double twin.
"""
from __future__ import annotations

import numpy as np

from .check import random_inputs
from ..runtime.loader import load

SAMPLES = 200
BUILD_SEED = 26            # the build's samples; check's fresh ones use other seeds
# fresh samples may reach a little past the largest of SAMPLES measured ones (a worse
# conditioned configuration); wrong float code errs by orders of magnitude more
CHECK_FACTOR = 4.0


def relative_error(reference, value):
    """max |value − reference| / max |reference| of one output at one sample (float64
    arithmetic); inf for a non-finite value, 0 for two zero outputs."""
    ref, val = np.asarray(reference, np.float64), np.asarray(value, np.float64)
    if not np.all(np.isfinite(val)):
        return float("inf")
    diff, scale = float(np.max(np.abs(val - ref), initial=0.0)), float(np.max(np.abs(ref), initial=0.0))
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def random_samples(f, robot, constraints, samples=SAMPLES, seed=BUILD_SEED):
    """``samples`` input dicts {name: value} for ``f`` (anything with the manifest's ``inputs``)
    from verify/check.random_inputs."""
    rng = np.random.default_rng(seed)
    for _ in range(samples):
        x = random_inputs(f, robot, constraints, rng)
        yield {k: v for k, v in x.items() if k != "K"} | x["K"]


def sample_errors(single, double, samples):
    """Per sample of ``samples``, the worst relative error over the outputs of ``single(**x)``
    against ``double(**x)`` (both: inputs by name -> {output: array})."""
    errors = []
    for x in samples:
        want = double(**x)
        got = single(**x)
        errors.append(max(relative_error(want[name], got[name]) for name in want))
    return np.array(errors)


def measure_bound(single, double, samples, seed=BUILD_SEED):
    """The manifest's record of what single precision costs: the largest and the median
    relative error of ``single`` against ``double`` over ``samples`` (input dicts), how many."""
    errors = sample_errors(_outputs(single), double, samples)
    return {"max_rel_error": float(np.max(errors)), "median_rel_error": float(np.median(errors)),
            "samples": int(errors.size), "seed": seed, "relative_to": "max |double output| per sample"}


def within_bound(single, double, samples):
    """(worst error on ``samples``, the allowed CHECK_FACTOR × the stored max_rel_error, passed)
    for the single-precision CompiledFunction ``single``."""
    worst = float(np.max(sample_errors(_outputs(single), double, samples)))
    allowed = CHECK_FACTOR * single.precision["max_rel_error"]
    return worst, allowed, worst <= allowed


def _outputs(f):
    """A CompiledFunction's outputs as a callable of named inputs."""
    return lambda **x: f.outputs(**x)


def sx_outputs(sx_function, manifest):
    """The traced CasADi function evaluated in double, as a callable of named inputs
    returning {output: array of the manifest's shape} (CasADi's matrices are column-major)."""
    def call(**x):
        args = [np.asarray(x[s["name"]], np.float64).reshape(s["shape"]) for s in manifest["inputs"]]
        res = sx_function(*args)
        res = res if isinstance(res, (list, tuple)) else [res]
        return {o["name"]: np.array(r, dtype=np.float64).reshape(o["shape"]) for o, r in zip(manifest["outputs"], res)}
    return call


def measurer(robot, constraints, samples=SAMPLES, seed=BUILD_SEED):
    """``measure(sx_function, manifest_path)`` for codegen/build.py: the precision record of the
    single-precision build at ``manifest_path`` against the traced function in double."""
    def measure(sx_function, manifest_path):
        single = load(manifest_path)
        return measure_bound(single, sx_outputs(sx_function, single.manifest),
                             random_samples(single, robot, constraints, samples, seed), seed)
    return measure
