"""Compare a generated function with the NumPy reference on random inputs."""
from __future__ import annotations

import numpy as np

from . import reference
from ..errors import ConstraintError


def relative_error(a, b):
    """max |a − b| / max |b|, the one error measure of the checks, tests and benchmarks: the
    same values in any shape (a column output against an (n,) oracle), NaN when the sizes differ."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size != b.size:
        return float("nan")
    return float(np.abs(a.ravel() - b.ravel()).max() / max(np.abs(b).max(), 1e-300))


def dynamics(robot, cs, x):
    """(v̇, λ) of the problem the inputs describe: soft constraints when the function takes
    weights R (reference.soft_dynamics), hard ones when it takes desired accelerations k
    (reference.constrained_dynamics, dense KKT), none (λ = None) otherwise.  Hard constraints
    that are redundant raise ConstraintError with the rank found (the generated code cannot)."""
    if "R" in x and "k" in x:
        return reference.soft_dynamics(robot, cs, x["q"], x["v"], x["tau"], x["k"], x["R"], x["K"])
    if "k" in x:
        return reference.constrained_dynamics(robot, cs, x["q"], x["v"], x["tau"], x["k"], x["K"])
    return reference.forward_dynamics(robot, x["q"], x["v"], x["tau"]), None


def damped_inverse(robot, cs, x):
    """(diag(R)⁻¹ + Λ⁻¹)⁻¹ lam: the matrix-free paper's damping, R a stiffness whose inverse is
    added to the Delassus matrix."""
    return np.linalg.solve(np.diag(1 / x["R"]) + reference.delassus(robot, cs, x["q"], x["K"]), x["lam"])


# output name -> oracle(robot, constraints, inputs) with inputs = {"q", "K" (dict), vectors...}
ORACLES = {
    "vdot": lambda robot, cs, x: dynamics(robot, cs, x)[0],
    "lam": lambda robot, cs, x: dynamics(robot, cs, x)[1],
    "tau": lambda robot, cs, x: reference.inverse_dynamics(robot, x["q"], x["v"], x["a"]),
    "delassus": lambda robot, cs, x: reference.delassus(robot, cs, x["q"], x["K"]),
    "osim": lambda robot, cs, x: reference.osim(robot, cs, x["q"], x["K"]),
    "delassus_apply": lambda robot, cs, x: reference.delassus(robot, cs, x["q"], x["K"]) @ x["lam"],
    "damped_inverse_apply": damped_inverse,
    "damped_inverse_explicit": damped_inverse,
}
ORACLES["delassus_explicit_apply"] = ORACLES["delassus_apply"]


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
    """{output: max relative error} of every output of ``f`` that has a NumPy oracle.  An
    output whose quantity does not exist for these constraints (Λ or hard dynamics with
    redundant constraints: the oracle raises ConstraintError) is left out."""
    rng = np.random.default_rng(seed)
    worst, not_applicable = {}, set()
    for _ in range(samples):
        x = random_inputs(f, robot, constraints, rng)
        args = {k: v for k, v in x.items() if k not in ("q", "K")} | x["K"]
        for name, value in f.outputs(x["q"], **args).items():
            if name in ORACLES and name not in not_applicable:
                try:
                    expected = ORACLES[name](robot, constraints, x)
                except ConstraintError:
                    not_applicable.add(name)
                    worst.pop(name, None)
                    continue
                worst[name] = max(worst.get(name, 0.0), relative_error(value, expected))
    return worst


def check_delassus(f, robot, constraints, samples=100, seed=0):
    """Max relative error of the Delassus output."""
    return check_outputs(f, robot, constraints, samples, seed)["delassus"]
