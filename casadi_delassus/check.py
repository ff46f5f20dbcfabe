"""Compare a generated function with the NumPy reference on random inputs."""
from __future__ import annotations

import numpy as np

from . import reference


def relative_error(a, b):
    scale = max(np.abs(b).max(), 1e-300)
    return float(np.abs(np.asarray(a) - b).max() / scale)


# output name -> oracle(robot, constraints, inputs) with inputs = {"q", "K" (dict), vectors...}
ORACLES = {
    "delassus": lambda robot, cs, x: reference.delassus(robot, cs, x["q"], x["K"]),
    "osim": lambda robot, cs, x: reference.osim(robot, cs, x["q"], x["K"]),
    "delassus_apply": lambda robot, cs, x: reference.delassus(robot, cs, x["q"], x["K"]) @ x["lam"],
    "damped_inverse_apply": lambda robot, cs, x: np.linalg.solve(np.diag(1 / x["R"]) + reference.delassus(robot, cs, x["q"], x["K"]), x["lam"]),
}


def random_inputs(f, robot, constraints, rng):
    """Random values for every input of ``f``: a valid q, K for runtime-input
    constraints, normal vectors, and positive weights R."""
    x = {"q": robot.random_q(rng), "K": constraints.random_inputs(rng)}
    for spec in f.inputs[1:]:
        n = spec["name"]
        if n not in x["K"]:
            x[n] = rng.uniform(0.1, 1.0, spec["shape"]) if n == "R" else rng.normal(size=spec["shape"])
    return x


def check_outputs(f, robot, constraints, samples=100, seed=0):
    """{output: max relative error} of every output of ``f`` that has a NumPy oracle."""
    rng = np.random.default_rng(seed)
    worst = {}
    for _ in range(samples):
        x = random_inputs(f, robot, constraints, rng)
        args = {k: v for k, v in x.items() if k not in ("q", "K")} | x["K"]
        for name, value in f.outputs(x["q"], **args).items():
            if name in ORACLES:
                worst[name] = max(worst.get(name, 0.0), relative_error(value, ORACLES[name](robot, constraints, x)))
    return worst


def check_delassus(f, robot, constraints, samples=100, seed=0):
    """Max relative error of the Delassus output."""
    return check_outputs(f, robot, constraints, samples, seed)["delassus"]
