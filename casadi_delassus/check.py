"""Compare a generated function with the NumPy reference on random configurations."""
from __future__ import annotations

import numpy as np

from . import reference


def relative_error(a, b):
    scale = max(np.abs(b).max(), 1e-300)
    return float(np.abs(np.asarray(a) - b).max() / scale)


def check_delassus(f, robot, constraints, samples=100, seed=0):
    """Max relative error of ``f(q, **K)`` against J M⁻¹ Jᵀ over ``samples`` random q
    (and random K for runtime-input constraints)."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(samples):
        q = robot.random_q(rng)
        K = constraints.random_inputs(rng)
        worst = max(worst, relative_error(f(q, **K), reference.delassus(robot, constraints, q, K)))
    return worst
