"""Check derivative functions (codegen/derivatives.py) against central finite differences of
the value function on the manifold, and JVP/VJP pairs against each other.

Finite differences.  Column j of the Jacobian with respect to an input is a fourth-order
central difference D(h) = (f(x − 2h e_j) − 8 f(x − h e_j) + 8 f(x + h e_j) − f(x + 2h e_j)) / 12h
of the *value* function, where x ± h e_j moves q as q ⊕ (±h e_j) with the model's integrate
(model/integrate.py) and every other input by ±h in one entry.  Steps: h_k = s·1e-3 / 4^k,
k = 0..3, s = 1 for q's tangent directions (radians, metres) and max(1, |x_j|) for the other
inputs; the column is D(h_{k+1}) for the k where D(h_k) and D(h_{k+1}) differ least (Ridders'
idea: where truncation, ∝ h⁴, and rounding, ∝ ε/h, are both smallest).  The fixed step
h = 1e-3 came within 2× of the tolerance on pv_osim_fast's factor outputs on go1 (5e-7: an
LDLᵀ pivot of 3e-3 that the step moves by a third); the chosen step gave 5e-10 there.

A derivative passes when max |ours − FD| / max |FD| is at most FD_TOL (1e-6), over the whole
output of a JVP or VJP and, for a Jacobian block d<o>_d<w>, relative to o's whole Jacobian (all
the inputs: a block that is exactly zero, pv_early's d pivot / d v, has FD's rounding only).

Dot-product test.  For a JVP ẏ = J ẋ and a VJP x̄ = Jᵀ ȳ at the same point and random seeds,
a = ⟨ẏ, ȳ⟩ and b = ⟨ẋ, x̄⟩ are equal in exact arithmetic; the relative difference
|a − b| / max(|a|, |b|) must be at most DOT_TOL (1e-12).  Reported next to it, not instead:
|a − b| / (‖ẏ‖ ‖ȳ‖), the difference on the scale of the products' rounding.  The two differ
where the inner product cancels (|a| ≪ ‖ẏ‖ ‖ȳ‖: random seeds nearly orthogonal to ẏ), which
makes the first measure large while ẏ and x̄ are as accurate as elsewhere.

Points.  Random as ``check`` draws them (check.random_inputs).  Two algorithms lose digits at
some configurations by their fixed elimination order, in the value and its derivatives alike,
and say so through their outputs (``conditioning``); a point where that indicator is below
PIVOT_MIN is drawn again and counted (``points``; reported, never silently):
- pv_early: its ``pivot`` output, the smallest ‖k̃‖² of its eliminations relative to its
  value at a generic configuration (dynamics/pv_early.py).
- pv_osim_fast: λmin(L_b^A) / λmin(Λ⁻¹) = ‖Λ‖ / ‖Λ_b‖, from its ``Lb_ldl`` and ``delassus``
  outputs.  Eq. (55) forms Λ as Λ_b − Λ_b K_b S⁻¹ K_bᵀ Λ_b with Λ_b = (L_b^A)⁻¹ (delassus/
  pv_osim_fast.py): near a configuration where a branch block of L_b^A is singular (a folded
  or straight knee under a 3D foot) Λ_b is 1/ratio times Λ and the subtraction cancels that
  many of its digits, more in its derivatives, while Λ⁻¹ itself is well conditioned.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..errors import DelassusError
from ..model.integrate import integrate
from .check import Comparison, random_inputs, relative_error

FD_STEP = 1e-3
FD_STEPS = 4
FD_TOL = 1e-6
DOT_TOL = 1e-12
# ``conditioning`` below this: the fixed elimination order loses digits there (README, "Hard
# cases"), in the value and in its derivatives alike; such points are redrawn and counted
PIVOT_MIN = 1e-3
FD_RULE = (f"fourth-order central differences of the compiled value function on the manifold (q ⊕ ±h, ±2h along "
           f"each tangent direction), h = s·{FD_STEP:g}/4^k, k < {FD_STEPS}, s = 1 (q) or max(1, |x_j|), the k whose "
           f"estimate moves least to the next; passes at a relative error (max |ours − FD| / max |FD|) ≤ {FD_TOL:g}")


def evaluate(f, values):
    """{output: numpy array} of ``f`` (a compiled function or a casadi.Function) at ``values``
    ({input name: array})."""
    if hasattr(f, "outputs") and callable(f.outputs):
        return f.outputs(**values)
    return {k: np.array(v) for k, v in f(**values).items()}


def _moved(robot, values, name, j, step):
    x = dict(values)
    if name == "q":
        delta = np.zeros(robot.nv)
        delta[j] = step
        x["q"] = integrate(robot, values["q"], delta)
    else:
        a = np.array(values[name], dtype=float)
        flat = a.reshape(-1, order="F")
        flat[j] += step
        x[name] = flat.reshape(a.shape, order="F")
    return x


def _stencil(value, robot, values, name, j, h):
    """{output: fourth-order central difference along column j of input ``name``, step h}."""
    ys = [evaluate(value, _moved(robot, values, name, j, s * h)) for s in (-2, -1, 1, 2)]
    return {o: np.asarray((ys[0][o] - 8 * ys[1][o] + 8 * ys[2][o] - ys[3][o]) / (12 * h), float).reshape(-1, order="F")
            for o in ys[0]}


def _spread(a, b):
    """The largest relative difference between two column estimates, over the outputs."""
    return max(np.abs(a[o] - b[o]).max() / max(np.abs(b[o]).max(), 1e-300) for o in a)


def fd_column(value, robot, values, name, j, scale):
    """{output: column j of d(output)/d(input ``name``)} by the module docstring's rule."""
    estimates = [_stencil(value, robot, values, name, j, scale * FD_STEP / 4 ** k) for k in range(FD_STEPS)]
    spreads = [_spread(a, b) for a, b in zip(estimates, estimates[1:])]
    return estimates[int(np.argmin(spreads)) + 1]


def fd_jacobian(value, robot, values, wrt):
    """{(output, input): FD Jacobian block (output entries column-major x columns)} of the
    value function ``value`` at ``values``, the inputs ``wrt`` (the module docstring's rule)."""
    blocks = {}
    for w in wrt:
        flat = None if w == "q" else np.asarray(values[w], float).reshape(-1, order="F")
        cols = [fd_column(value, robot, values, w, j, 1.0 if w == "q" else max(1.0, abs(flat[j])))
                for j in range(robot.nv if w == "q" else flat.size)]
        for o in cols[0]:
            blocks[o, w] = np.column_stack([c[o] for c in cols])
    return blocks


def _flat(a):
    return np.asarray(a, float).reshape(-1, order="F")


@dataclass
class Checkable:
    """A derivative function to check: ``function`` (compiled, or a casadi.Function traced by
    codegen/derivatives.py), its manifest-style ``inputs`` and its derivative ``record``."""
    function: object
    inputs: list
    record: dict

    @classmethod
    def compiled(cls, f):
        return cls(f, f.inputs, f.manifest["derivative"])

    @classmethod
    def traced(cls, traced):
        """From codegen/derivatives.trace_derivative's (function, inputs, outputs, record)."""
        return cls(traced[0], traced[1], traced[3])

    def point(self, robot, constraints, rng):
        """Random values of the value function's inputs (check.random_inputs: a valid q, K,
        normal vectors, positive R)."""
        x = random_inputs(SimpleNamespace(inputs=self.inputs[:len(self.record["inputs"])]), robot, constraints, rng)
        return {k: v for k, v in x.items() if k != "K"} | x["K"]

    def seeds(self, rng):
        """Random seeds: the inputs that are not the value function's."""
        return {i["name"]: rng.normal(size=i["shape"]) for i in self.inputs[len(self.record["inputs"]):]}


def expected(record, fd, seed):
    """What the derivative function should return with ``seed``, from the FD blocks ``fd``
    (which may hold more inputs than the function's ``wrt``)."""
    wrt, outputs = record["wrt"], list(dict.fromkeys(o for o, _ in fd))
    if record["mode"] == "jacobian":
        return {f"d{o}_d{w}": fd[o, w] for o in outputs for w in wrt}
    if record["mode"] == "jvp":
        return {f"{o}_dot": sum(fd[o, w] @ _flat(seed[f"{w}_dot"]) for w in wrt) for o in outputs}
    return {f"{w}_bar": sum(fd[o, w].T @ _flat(seed[f"{o}_bar"]) for o in outputs) for w in wrt}


def conditioning(y):
    """The indicator, from the value function's outputs ``y``, of the digits its fixed
    elimination order loses at that point (the module docstring): pv_early's ``pivot``,
    pv_osim_fast's λmin(L_b^A) / λmin(Λ⁻¹) (L_b^A = L D Lᵀ from ``Lb_ldl``); None for the
    other algorithms."""
    if "pivot" in y:
        return float(np.min(y["pivot"]))
    if "Lb_ldl" in y:
        packed = np.asarray(y["Lb_ldl"], float)
        L = np.tril(packed, -1) + np.eye(len(packed))
        return float(np.linalg.eigvalsh(L * np.diag(packed) @ L.T)[0] / np.linalg.eigvalsh(y["delassus"])[0])
    return None


def points(derivative, value, robot, constraints, samples, rng, skipped):
    """``samples`` random points (values of the value function's inputs) where the value
    function is well conditioned: a point where its ``conditioning`` is below PIVOT_MIN is
    drawn again and counted in ``skipped`` (a list: the indicator of each point left out)."""
    done = 0
    while done < samples:
        values = derivative.point(robot, constraints, rng)
        ratio = None if value is None else conditioning(evaluate(value, values))
        if ratio is not None and ratio < PIVOT_MIN:
            skipped.append(ratio)
            if len(skipped) > 10 * samples:
                raise DelassusError(f"{len(skipped)} random points had a conditioning indicator below {PIVOT_MIN:g} "
                                    f"(verify/derivatives.py): none to check")
            continue
        done += 1
        yield values


def _error(got, want, name, record, fd):
    """Relative error of one output of a derivative function; a Jacobian block relative to the
    whole Jacobian of its output (a block that is zero, d pivot / d v, has only FD's rounding)."""
    if record["mode"] != "jacobian":
        return relative_error(_flat(got), _flat(want))
    output = next(o for o, w in fd if name == f"d{o}_d{w}")
    scale = max(np.abs(fd[output, w]).max() for w in record["wrt"])
    diff = np.abs(_flat(got) - _flat(want))
    return float(diff.max() / max(scale, 1e-300)) if np.all(np.isfinite(diff)) else float("inf")


def compare_derivatives(derivatives, value, robot, constraints, samples=20, seed=0, tol=FD_TOL, skipped=None):
    """[{output: Comparison}] of each of ``derivatives`` (Checkables of one value function)
    against the finite differences of the value function ``value`` over ``samples`` random
    points (``points``; each point's FD serve them all) and seeds."""
    rng = np.random.default_rng(seed)
    out, skipped = [{} for _ in derivatives], [] if skipped is None else skipped
    wrt = list(dict.fromkeys(w for d in derivatives for w in d.record["wrt"]))
    for values in points(derivatives[0], value, robot, constraints, samples, rng, skipped):
        fd = fd_jacobian(value, robot, values, wrt)
        for d, results in zip(derivatives, out):
            s = d.seeds(rng)
            got = evaluate(d.function, values | s)
            for name, want in expected(d.record, fd, s).items():
                results.setdefault(name, Comparison()).add(_error(got[name], want, name, d.record, fd), tol, 1.0)
    return out


def compare_derivative(derivative, value, robot, constraints, samples=20, seed=0, tol=FD_TOL, skipped=None):
    """{output: Comparison} of one derivative function (``compare_derivatives``)."""
    return compare_derivatives([derivative], value, robot, constraints, samples, seed, tol, skipped)[0]


def dot_products(jvp, vjp, robot, constraints, samples=20, seed=0, value=None, skipped=None):
    """[(⟨ẏ, ȳ⟩, ⟨ẋ, x̄⟩, ‖ẏ‖ ‖ȳ‖)] over ``samples`` random points (``points``, with the value
    function ``value`` if given) and seeds, for a JVP and a VJP (Checkables) with respect to
    the same inputs."""
    if jvp.record["wrt"] != vjp.record["wrt"]:
        raise DelassusError("the dot-product test needs a JVP and a VJP with respect to the same inputs")
    rng = np.random.default_rng(seed)
    out, skipped = [], [] if skipped is None else skipped
    for values in points(jvp, value, robot, constraints, samples, rng, skipped):
        xdot, ybar = jvp.seeds(rng), vjp.seeds(rng)
        ydot, xbar = evaluate(jvp.function, values | xdot), evaluate(vjp.function, values | ybar)
        pairs = [(_flat(ydot[n.removesuffix("_bar") + "_dot"]), _flat(ybar[n])) for n in ybar]
        a = sum(float(y @ s) for y, s in pairs)
        b = sum(float(_flat(xdot[n]) @ _flat(xbar[n.removesuffix("_dot") + "_bar"])) for n in xdot)
        scale = np.sqrt(sum(float(y @ y) for y, _ in pairs) * sum(float(s @ s) for _, s in pairs))
        out.append((a, b, scale))
    return out


def dot_errors(products):
    """(the largest |a − b| / max(|a|, |b|), the largest |a − b| / (‖ẏ‖ ‖ȳ‖)) over
    ``dot_products``' triples (the module docstring); inf where any is not finite."""
    def worst(denominator):
        return max((abs(a - b) / max(denominator(a, b, s), 1e-300) if np.isfinite(a + b) else float("inf")
                    for a, b, s in products), default=0.0)
    return worst(lambda a, b, s: max(abs(a), abs(b))), worst(lambda a, b, s: s)


def dot_test(jvp, vjp, robot, constraints, samples=20, seed=0, value=None, skipped=None):
    """The largest |⟨ẏ, ȳ⟩ − ⟨ẋ, x̄⟩| / max(|⟨ẏ, ȳ⟩|, |⟨ẋ, x̄⟩|) of ``dot_products``."""
    return dot_errors(dot_products(jvp, vjp, robot, constraints, samples, seed, value, skipped))[0]
