"""Check derivative functions (codegen/derivatives.py) against central finite differences of
the value function on the manifold, and JVP/VJP pairs against each other.

Finite differences.  Column j of the Jacobian with respect to an input is the fourth-order
central difference (f(x − 2h e_j) − 8 f(x − h e_j) + 8 f(x + h e_j) − f(x + 2h e_j)) / (12 h)
of the *value* function, where x ± h e_j moves q as q ⊕ (±h e_j) with the model's integrate
(model/integrate.py) and every other input by ±h in one entry.  FD_STEP = 1e-3 relative:
h = 1e-3 for q's tangent directions (radians, metres) and 1e-3·max(1, |x_j|) for the other
inputs, so the truncation error (h⁴ times fifth derivatives) and the rounding error (ε·|f|/h)
are both near 1e-12 of the outputs' scale on the robots of the tests.  A derivative passes
when max |ours − FD| / max |FD| over the whole compared quantity is at most FD_TOL (1e-6).

Dot-product test.  For a JVP ẏ = J ẋ and a VJP x̄ = Jᵀ ȳ at the same point and random seeds,
⟨ẏ, ȳ⟩ = ⟨ẋ, x̄⟩ exactly in exact arithmetic; the relative difference |a − b| / max(|a|, |b|)
must be at most DOT_TOL (1e-12).

Points.  Random as ``check`` draws them (check.random_inputs); pv_early's points where its own
``pivot`` output is below PIVOT_MIN are drawn again and counted (``points``).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..errors import DelassusError
from ..model.integrate import integrate
from .check import Comparison, random_inputs, relative_error

FD_STEP = 1e-3
FD_TOL = 1e-6
DOT_TOL = 1e-12
# pv_early's pivot output below this: its fixed elimination order loses digits there (README,
# "Hard cases"), in the value and in its derivatives alike; such points are not checked
PIVOT_MIN = 1e-3
FD_RULE = (f"fourth-order central differences of the compiled value function on the manifold (q ⊕ ±h, ±2h along "
           f"each tangent direction), h = {FD_STEP:g} (q) or {FD_STEP:g}·max(1, |x_j|) (other inputs); passes at a "
           f"relative error (max |ours − FD| / max |FD|) ≤ {FD_TOL:g}")


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


def fd_jacobian(value, robot, values, wrt):
    """{(output, input): FD Jacobian block (output entries column-major x columns)} of the
    value function ``value`` at ``values``, the inputs ``wrt`` (the module docstring's rule)."""
    blocks = {}
    for w in wrt:
        ncols = robot.nv if w == "q" else np.size(values[w])
        flat = None if w == "q" else np.asarray(values[w], float).reshape(-1, order="F")
        cols = {}
        for j in range(ncols):
            h = FD_STEP if w == "q" else FD_STEP * max(1.0, abs(flat[j]))
            ys = [evaluate(value, _moved(robot, values, w, j, s * h)) for s in (-2, -1, 1, 2)]
            for o in ys[0]:
                d = (ys[0][o] - 8 * ys[1][o] + 8 * ys[2][o] - ys[3][o]) / (12 * h)
                cols.setdefault(o, []).append(np.asarray(d, float).reshape(-1, order="F"))
        for o, c in cols.items():
            blocks[o, w] = np.column_stack(c)
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

    def point(self, robot, constraints, rng):
        """Random values of the value function's inputs (check.random_inputs: a valid q, K,
        normal vectors, positive R)."""
        x = random_inputs(SimpleNamespace(inputs=self.inputs[:len(self.record["inputs"])]), robot, constraints, rng)
        return {k: v for k, v in x.items() if k != "K"} | x["K"]

    def seeds(self, rng):
        """Random seeds: the inputs that are not the value function's."""
        return {i["name"]: rng.normal(size=i["shape"]) for i in self.inputs[len(self.record["inputs"]):]}


def expected(record, fd, seed):
    """What the derivative function should return with ``seed``, from the FD blocks ``fd``."""
    wrt, outputs = record["wrt"], list(dict.fromkeys(o for o, _ in fd))
    if record["mode"] == "jacobian":
        return {f"d{o}_d{w}": fd[o, w] for o in outputs for w in wrt}
    if record["mode"] == "jvp":
        return {f"{o}_dot": sum(fd[o, w] @ _flat(seed[f"{w}_dot"]) for w in wrt) for o in outputs}
    return {f"{w}_bar": sum(fd[o, w].T @ _flat(seed[f"{o}_bar"]) for o in outputs) for w in wrt}


def points(derivative, value, robot, constraints, samples, rng, skipped):
    """``samples`` random points (values of the value function's inputs) where the value
    function is well conditioned: a point where its ``pivot`` output (pv_early's fixed
    elimination order, dynamics/pv_early.py) is below PIVOT_MIN is drawn again and counted
    in ``skipped`` (a list: one entry per point left out)."""
    done = 0
    while done < samples:
        values = derivative.point(robot, constraints, rng)
        if value is not None and "pivot" in (y := evaluate(value, values)) and float(np.min(y["pivot"])) < PIVOT_MIN:
            skipped.append(float(np.min(y["pivot"])))
            if len(skipped) > 10 * samples:
                raise DelassusError(f"{len(skipped)} random points had a pivot below {PIVOT_MIN:g}: none to check")
            continue
        done += 1
        yield values


def compare_derivative(derivative, value, robot, constraints, samples=20, seed=0, tol=FD_TOL, skipped=None):
    """{output: Comparison} of ``derivative`` (a Checkable) against the finite differences of
    the value function ``value`` over ``samples`` random points and seeds (``points``)."""
    rng = np.random.default_rng(seed)
    out, skipped = {}, [] if skipped is None else skipped
    for values in points(derivative, value, robot, constraints, samples, rng, skipped):
        s = derivative.seeds(rng)
        got = evaluate(derivative.function, values | s)
        fd = fd_jacobian(value, robot, values, derivative.record["wrt"])
        for name, want in expected(derivative.record, fd, s).items():
            out.setdefault(name, Comparison()).add(relative_error(got[name], want), tol, 1.0)
    return out


def dot_test(jvp, vjp, robot, constraints, samples=20, seed=0, value=None, skipped=None):
    """The largest |⟨ẏ, ȳ⟩ − ⟨ẋ, x̄⟩| / max(|⟨ẏ, ȳ⟩|, |⟨ẋ, x̄⟩|) over ``samples`` random points
    (``points``, with the value function ``value`` if given) and seeds, for a JVP and a VJP
    (Checkables) with respect to the same inputs."""
    if jvp.record["wrt"] != vjp.record["wrt"]:
        raise DelassusError("the dot-product test needs a JVP and a VJP with respect to the same inputs")
    rng = np.random.default_rng(seed)
    worst, skipped = 0.0, [] if skipped is None else skipped
    for values in points(jvp, value, robot, constraints, samples, rng, skipped):
        xdot, ybar = jvp.seeds(rng), vjp.seeds(rng)
        ydot, xbar = evaluate(jvp.function, values | xdot), evaluate(vjp.function, values | ybar)
        a = sum(float(_flat(ydot[n.removesuffix("_bar") + "_dot"]) @ _flat(ybar[n])) for n in ybar)
        b = sum(float(_flat(xdot[n]) @ _flat(xbar[n.removesuffix("_dot") + "_bar"])) for n in xdot)
        worst = max(worst, abs(a - b) / max(abs(a), abs(b), 1e-300) if np.isfinite(a + b) else float("inf"))
    return worst
