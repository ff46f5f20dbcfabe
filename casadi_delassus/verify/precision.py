"""What single precision costs: a function's error in float against the same function in
double, measured on random inputs (issue 26).

For one sample, ``relative_error(reference, value)`` (``relative_errors``: per sample of a
batch) is max |value − reference| / max |reference| over an output's entries (the scale of
the output, not entry by entry: entries that cancel to ~0 in double would otherwise dominate);
a function's error at a sample is the worst over its outputs.  The CUDA target
(codegen/cuda.py) measures and records its single precision with the same definitions.  ``measure_bound`` records the largest and the median over SAMPLES
samples of verify/check.random_inputs (the sampler of ``check``), with the seed it used; the
build stores that record in the manifest's ``precision`` entry (codegen/build.py).

The record is a measurement, not a proven bound: ``within_bound`` checks a function on fresh
samples (another seed) against CHECK_FACTOR times it.  Float code that is wrong (a constant
rounded badly, an operation dropped) errs by far more than that (tests/verify/test_precision.py).
The double function compared with is any callable of the same inputs: at build, the traced
SX function evaluated by CasADi (:func:`sx_outputs`); in ``check``, the compiled double twin.
"""
from __future__ import annotations

import numpy as np

from .check import random_inputs
from ..runtime.loader import load

SAMPLES = 200
# the most samples check_precision takes: a bound on its work (each sample evaluates both builds from Python), far
# above what a bound needs; more (2^63 once) ran without end
MAX_SAMPLES = 100_000
BUILD_SEED = 26            # the build's samples; check's fresh ones use other seeds
# fresh samples may reach a little past the largest of SAMPLES measured ones (a worse
# conditioned configuration); wrong float code errs by orders of magnitude more
CHECK_FACTOR = 4.0
RELATIVE_TO = "max |double output| per sample"


def relative_errors(reference, value):
    """Per sample (the first axis), max |value − reference| / max |reference| over the entries of
    one output (float64 arithmetic); inf where either is not finite, 0 for two zero outputs."""
    ref = np.asarray(reference, np.float64).reshape(len(reference), -1)
    val = np.asarray(value, np.float64).reshape(ref.shape)
    diff, scale = np.abs(val - ref).max(axis=1, initial=0.0), np.abs(ref).max(axis=1, initial=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.where(scale > 0, diff / scale, np.where(diff == 0, 0.0, np.inf))
    errors[~(np.isfinite(val).all(axis=1) & np.isfinite(ref).all(axis=1))] = np.inf
    return errors


def relative_error(reference, value):
    """relative_errors of one sample."""
    return float(relative_errors(np.asarray(reference)[None], np.asarray(value)[None])[0])


def batch_errors(f, reference, values):
    """{output: the largest relative_errors over the batch} of ``f`` against ``reference`` (both
    with ``outputs(Q, **named inputs)`` over batches) at ``values`` (inputs in manifest order)."""
    named = dict(zip([i["name"] for i in reference.inputs][1:], values[1:]))
    got, want = f.outputs(values[0], **named), reference.outputs(values[0], **named)
    return {name: float(relative_errors(w, got[name]).max()) for name, w in want.items()}


def record(errors, seed):
    """The manifest's ``precision`` entries of a measurement (both targets, C and CUDA): the largest
    and the median of the per-sample ``errors``, how many, the seed."""
    errors = np.asarray(errors)
    return {"max_rel_error": float(np.max(errors)), "median_rel_error": float(np.median(errors)),
            "samples": int(errors.size), "seed": seed, "relative_to": RELATIVE_TO}


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
    return record(sample_errors(_outputs(single), double, samples), seed)


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


# -- rollouts (issue 33): a single-precision C rollout against the same rollout in double --------------------------
ROLLOUT_STEPS = 1000          # steps the build measures over
ROLLOUT_ENVIRONMENTS = 4      # environments it measures (the first of the call that builds it)
ROLLOUT_HORIZONS = (1, 10, 100, 1000)     # the error within the first steps of these counts, recorded beside
ROLLOUT_RELATIVE_TO = "max |double q| and max |double v| over each environment's steps (q and v apart)"


def rollout_errors(double, single, steps=None, names=("Q", "V")):
    """Per environment, the worst of max |q32 − q64| / max |q64| and the same of v (``names``: RawRollouts' fields)
    over the steps ``single`` and ``double`` (RawRollouts, runtime/contact_rollout.py) both recorded (the first
    ``steps`` states only, given), the scales over every state of the double rollout (float64 arithmetic); inf where
    their step counts or last statuses differ (one stopped where the other did not, or for another reason; "ok" and
    "free" may differ on the way, where a gap near the activation margin is rounded across it) or a state is not
    finite in one of them only."""
    out = []
    for e in range(len(double.count)):
        n = int(double.count[e])
        if n != int(single.count[e]) or (n and double.STATUS[n - 1, e] != single.STATUS[n - 1, e]):
            out.append(np.inf)
            continue
        worst = 0.0
        for name in names:
            ref, val = (np.asarray(getattr(r, name)[:n + 1, e], np.float64) for r in (double, single))
            if not np.array_equal(np.isnan(ref), np.isnan(val)):
                worst = np.inf
                continue
            scale = np.nanmax(np.abs(ref), initial=0.0)
            upto = slice(None) if steps is None else slice(0, steps + 1)
            diff = np.nanmax(np.abs(val[upto] - ref[upto]), initial=0.0)
            worst = max(worst, diff / scale if scale > 0 else 0.0 if diff == 0 else np.inf)
        out.append(worst)
    return np.array(out)


def rollout_record(double, single, steps, dt):
    """The manifest's ``precision`` entries of a single-precision rollout measured against its double twin
    (``double`` and ``single``: RawRollouts of the same environments, ``steps`` steps of ``dt``): record()'s
    keys over the environments (rollout_errors), then the steps, dt and the largest error within the first steps of
    each ROLLOUT_HORIZONS count (how it grows), and q's and v's largest errors apart."""
    return record(rollout_errors(double, single), None) | {
        "relative_to": ROLLOUT_RELATIVE_TO, "steps": int(steps), "dt": float(dt),
        "outputs": {name.lower(): float(rollout_errors(double, single, names=(name,)).max()) for name in ("Q", "V")},
        "growth": {str(h): float(rollout_errors(double, single, h).max()) for h in ROLLOUT_HORIZONS if h <= steps}}
