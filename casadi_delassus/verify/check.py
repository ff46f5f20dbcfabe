"""Compare a generated function with the NumPy reference on random inputs.

The tolerance rule (``allowed_error``): a sample passes when its relative error (max |ours −
reference| / max |reference|; NaN or inf in either is an error of inf, never a pass) is at most
``tol · max(1, κ / KAPPA_FREE)``, κ the 2-norm condition number at that sample of the matrix
the output's problem inverts (``condition``): Λ⁻¹ for Λ and the hard constrained dynamics,
Λ⁻¹ + diag(R) for the soft ones, diag(R)⁻¹ + Λ⁻¹ for the damped inverse, and 1 for what
inverts nothing of the constraints (Λ⁻¹ itself, Λ⁻¹λ, ABA, RNEA).  Above κ = KAPPA_FREE the
allowance is tol·κ/KAPPA_FREE = 45 ε κ for the default tol 1e-10: a backward-stable solve
loses up to a small multiple of ε κ, and the largest measured on Talos, Atlas, Go1, G1, Panda
and Bolt (3D and 6D feet, κ up to 1.9e8) with every stable algorithm was 20 ε κ; a result
perturbed by 1e-8 at κ = 100 still fails.  Below it, the fixed tol applies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import reference
from ..errors import ConstraintError, DelassusError
from ..progress import counted

DEFAULT_TOL = 1e-10
KAPPA_FREE = 1e4
TOLERANCE_RULE = (f"a sample passes when its relative error (NaN or inf: never) is at most TOL·max(1, κ/{KAPPA_FREE:g}), "
                  f"κ the condition number of the matrix the output inverts at that sample (Λ⁻¹ for Λ and hard "
                  f"dynamics, Λ⁻¹ + diag(R) for soft dynamics, diag(R)⁻¹ + Λ⁻¹ for the damped inverse, 1 for Λ⁻¹, "
                  f"Λ⁻¹λ, aba, rnea)")


def relative_error(a, b):
    """max |a − b| / max |b|, the one error measure of the checks, tests and benchmarks: the
    same values in any shape (a column output against an (n,) oracle); NaN when the sizes
    differ, inf when either holds a NaN or inf: a non-finite result is never close to anything
    (``max(0.0, nan)`` is 0.0, which once reported NaN as "ok")."""
    a, b = np.asarray(a, float).ravel(), np.asarray(b, float).ravel()
    if a.size != b.size:
        return float("nan")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return float("inf")
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def allowed_error(tol, kappa):
    """The module docstring's rule."""
    return tol * max(1.0, kappa / KAPPA_FREE)


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


def _cond(A):
    return float(np.linalg.cond(A)) if np.all(np.isfinite(A)) else float("inf")


def condition(name, x, delassus):
    """κ of the problem output ``name`` solves at the inputs ``x`` (the module docstring), the
    Delassus matrix from ``delassus(x)`` (the oracle's own)."""
    if name in ("osim", "vdot", "lam") and ("k" in x or name == "osim"):
        D = delassus(x)
        return _cond(D + np.diag(x["R"]) if "R" in x else D)
    if name in ("damped_inverse_apply", "damped_inverse_explicit"):
        return _cond(np.diag(1 / x["R"]) + delassus(x))
    return 1.0


class NotApplicable(Exception):
    """An oracle has no answer for an output: the quantity does not exist for these
    constraints (redundant hard constraints), or the oracle has nothing to compare it with.
    The message says which; ``check`` reports the output as n/a, never as passed."""


class NumpySession:
    """The NumPy reference (reference.py) as an oracle for one robot and constraint set."""

    notes = ()

    def __init__(self, robot, constraints):
        self.robot, self.cs = robot, constraints

    def prepare(self, x):
        return x

    def expected(self, name, x):
        if name not in ORACLES:
            raise NotApplicable("no counterpart in the NumPy reference")
        try:
            return ORACLES[name](self.robot, self.cs, x)
        except ConstraintError as exc:
            raise NotApplicable(f"no unique answer: {exc}") from None

    def delassus(self, x):
        return reference.delassus(self.robot, self.cs, x["q"], x["K"])


class FunctionSession(NumpySession):
    """Another function of the same inputs as the oracle (``outputs(q, **inputs)``; ``check
    --target cuda``: the C target's function for the host build of its CUDA form), κ from the
    NumPy reference's Delassus matrix; ``note`` says what it is."""

    def __init__(self, robot, constraints, function, note):
        super().__init__(robot, constraints)
        self.function, self.notes = function, (note,)

    def expected(self, name, x):
        args = {k: v for k, v in x.items() if k not in ("q", "K")} | x["K"]
        return self.function.outputs(x["q"], **args)[name]


class Outcome(dict):
    """{output: Comparison} of one oracle, with ``not_applicable`` ({output: reason}) for the
    outputs it could compare at no sample, ``skipped`` ({output: (samples, reason)}) for those
    it could not compare at some samples (e.g. a configuration where J M⁻¹ Jᵀ is numerically
    singular), and the oracle's ``notes`` (e.g. which model it read)."""

    def __init__(self, results=(), not_applicable=None, notes=(), skipped=None):
        super().__init__(results)
        self.not_applicable, self.notes = dict(not_applicable or {}), list(notes)
        self.skipped = dict(skipped or {})

    @property
    def passed(self) -> bool:
        """Every output compared passed, and at least one was compared."""
        return bool(self) and all(c.passed for c in self.values())


@dataclass
class Comparison:
    """One output over the samples: the worst relative ``error``; at the sample closest to
    failing (the largest error / allowed), its ``allowed`` error and its ``kappa``."""
    error: float = 0.0
    allowed: float = float("inf")
    kappa: float = 1.0
    ratio: float = 0.0

    @property
    def passed(self) -> bool:
        """The sample closest to failing stayed within its allowed error."""
        return self.ratio <= 1.0

    def add(self, error, allowed, kappa):
        self.error = max(self.error, error)
        ratio = error / allowed if np.isfinite(error) and allowed > 0 else float("inf")
        if ratio >= self.ratio:                     # >=: an inf error at an inf allowance still shows
            self.ratio, self.allowed, self.kappa = ratio, allowed, kappa


def compare(f, robot, constraints, samples=100, seed=0, tol=DEFAULT_TOL, oracle=None):
    """Outcome ({output: Comparison}, .not_applicable, .notes) of every output of ``f`` against
    ``oracle`` (a session of verify/oracles.py; default the NumPy reference) on ``samples``
    random inputs, which the oracle may adjust first (``prepare``: Pinocchio's constrained
    dynamics fix k).  An output the oracle has no answer for (NotApplicable: e.g. Λ or hard
    dynamics with redundant constraints) at any sample is named with the reason in
    ``not_applicable``; at some samples only, in ``skipped`` with their number."""
    if getattr(robot, "coupling", None) is not None:     # the references run over independent joints
        raise DelassusError(f"robot {robot.name!r} has coupled mimic joints (mimic=True, --mimic): check compares with "
                            f"references of independent joints; tests/model/test_mimic.py compares it with Pinocchio's "
                            f"mimic model")
    oracle = oracle or NumpySession(robot, constraints)
    rng = np.random.default_rng(seed)
    out, skipped = Outcome(notes=oracle.notes), {}
    for _ in counted(samples, "samples"):
        x = oracle.prepare(random_inputs(f, robot, constraints, rng))
        args = {k: v for k, v in x.items() if k not in ("q", "K")} | x["K"]
        for name, value in f.outputs(x["q"], **args).items():
            try:
                expected = oracle.expected(name, x)
            except NotApplicable as exc:
                skipped.setdefault(name, [0, str(exc)])[0] += 1
                continue
            kappa = condition(name, x, oracle.delassus)
            out.setdefault(name, Comparison()).add(relative_error(value, expected), allowed_error(tol, kappa), kappa)
    for name, (count, reason) in skipped.items():
        if name in out:
            out.skipped[name] = (count, reason)
        else:
            out.not_applicable[name] = reason
    return out


def check_outputs(f, robot, constraints, samples=100, seed=0):
    """{output: max relative error} (inf when a NaN or inf appeared) of every output of ``f``
    that has a NumPy oracle (``compare``)."""
    return {name: c.error for name, c in compare(f, robot, constraints, samples, seed).items()}


def check_delassus(f, robot, constraints, samples=100, seed=0):
    """Max relative error of the Delassus output."""
    return check_outputs(f, robot, constraints, samples, seed)["delassus"]
