"""Compare a generated function with the NumPy reference on random configurations."""
from __future__ import annotations

import numpy as np

from . import reference

ORACLES = {"delassus": reference.delassus, "osim": reference.osim}


def relative_error(a, b):
    scale = max(np.abs(b).max(), 1e-300)
    return float(np.abs(np.asarray(a) - b).max() / scale)


def check_outputs(f, robot, constraints, samples=100, seed=0):
    """{output: max relative error} of every output of ``f`` that has a NumPy oracle, over
    ``samples`` random q (and random K for runtime-input constraints)."""
    rng = np.random.default_rng(seed)
    worst = {}
    for _ in range(samples):
        q = robot.random_q(rng)
        K = constraints.random_inputs(rng)
        for name, value in f.outputs(q, **K).items():
            if name in ORACLES:
                err = relative_error(value, ORACLES[name](robot, constraints, q, K))
                worst[name] = max(worst.get(name, 0.0), err)
    return worst


def check_delassus(f, robot, constraints, samples=100, seed=0):
    """Max relative error of the Delassus output."""
    return check_outputs(f, robot, constraints, samples, seed)["delassus"]
