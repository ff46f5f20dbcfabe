"""Derivatives of a traced algorithm: forward directional derivatives (``jvp``), reverse
vector-Jacobian products (``vjp``) and Jacobians (``jacobian``) with respect to a chosen set
of its inputs ``wrt`` (q, the vectors v, tau, k, R, lam, a, runtime K_<link>).

Tangent space.  q enters through the model's integrate (model/integrate.py): the q column j
of a Jacobian is d/dε f(q ⊕ ε e_j) at ε = 0, a JVP's seed ``q_dot`` (nv) is a tangent
direction and a VJP's ``q_bar`` (nv) a cotangent, as Pinocchio's and MuJoCo's derivatives
are.  CasADi differentiates f in the stored coordinates, so the tangent map T(q) =
∂(q ⊕ δ)/∂δ at δ = 0 (nq x nv, closed form) turns those into tangent ones: ∂f/∂δ = ∂f/∂q T(q).
Every other input is differentiated as it is (a K_<link> by its column-major entries).

Names.  A JVP takes the value function's inputs and a seed ``<input>_dot`` (the input's
shape; q_dot: nv) per input in ``wrt`` and returns ``<output>_dot`` per output; a VJP takes
the inputs and ``<output>_bar`` per output and returns ``<input>_bar`` per input in ``wrt``; a
Jacobian returns ``d<output>_d<input>`` (the output's entries, column-major, x the input's
columns: nv for q) per output and input in ``wrt``.

How.  CasADi's forward mode (``jtimes``) for JVPs and Jacobians, its reverse mode for VJPs:
after cse, a forward sweep per column shares what the columns have in common, and on go1 4F3
the Jacobian of pv with respect to (q, v, τ, k) then costs 18× the value against 47× for
``casadi.jacobian``'s choice (reverse, one sweep per output entry).  An algorithm with
analytical derivatives (registry.Algorithm.derivative) provides Jacobian blocks instead
(method "analytic", the default for Jacobians where it exists); a block it leaves out is
taken by forward mode.  An algorithm with a KKT solve of its own (registry.Algorithm.kkt_solve:
pv_early, whose fixed elimination order AD would differentiate through, losing digits near
small pivots) takes its JVPs and VJPs by the implicit-function theorem instead (``_Implicit``,
method "implicit", the default for them there).
"""
from __future__ import annotations

import itertools

import casadi as ca

from ..errors import ConstraintError, DelassusError
from ..model.integrate import integrate_sx, tangent_map_sx
from ..progress import step
from ..registry import AUTO, VECTOR_INPUTS, get_algorithm
from ..sweeps.dynamics_derivatives import kkt_residual
from ..sweeps.tree import Tree, world_row_drift
from .trace import describe_inputs, function_of, traced_outputs

DERIVATIVES = ("jvp", "vjp", "jacobian")
METHODS = ("auto", "ad", "analytic")
TANGENT_RULE = ("q derivatives are in the tangent space: column j is d/dε f(q ⊕ ε e_j), ⊕ the model's integrate "
                "(Pinocchio's for URDF/SDF/spatial_v2/synthetic models, MuJoCo's mj_integratePos for MJCF)")


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def columns(spec, nv):
    """How many derivative columns an input has: nv for q (tangent directions), else its entries."""
    return nv if spec["name"] == "q" else _numel(spec["shape"])


def resolve_wrt(names, wrt):
    """``wrt`` (None: every input; names, or one comma-separated string) as a tuple in the
    order of ``names``, the function's inputs; DelassusError naming unknown ones."""
    if wrt is None:
        return tuple(names)
    given = [w.strip() for w in (wrt.split(",") if isinstance(wrt, str) else wrt)]
    unknown = [w for w in given if w not in names]
    if unknown or not given or "" in given:
        raise DelassusError(f"--wrt {','.join(given)!r}: {'unknown input(s) ' + ', '.join(map(repr, unknown)) if unknown else 'empty'}; "
                            f"this function takes {', '.join(names)}")
    return tuple(n for n in names if n in given)


def input_names(robot, constraints, algorithm):
    """The inputs of ``algorithm``'s function (``auto``: a Delassus algorithm's, q and runtime K)."""
    if algorithm == AUTO:
        return ["q", *(c.input_name for c in constraints.inputs)]
    return [i["name"] for i in describe_inputs(robot, constraints, algorithm)]


def check_request(derivative, method="auto"):
    if derivative not in DERIVATIVES:
        raise DelassusError(f"unknown derivative {derivative!r}: use one of {', '.join(DERIVATIVES)}")
    if method not in METHODS:
        raise DelassusError(f"unknown derivative method {method!r}: use one of {', '.join(METHODS)}")


def _direction(robot, name, symbol):
    """Columns of the input ``name`` as directions in its stored entries: T(q) for q, I else."""
    return tangent_map_sx(robot, symbol) if name == "q" else ca.SX.eye(symbol.numel())


def _split(vector, shapes):
    """``vector`` cut into pieces of the given (rows, cols) shapes (column-major)."""
    out, k = [], 0
    for rows, cols in shapes:
        out.append(ca.reshape(vector[k:k + rows * cols], rows, cols))
        k += rows * cols
    return out


def _ad_jacobian(t, wrt, outputs=None):
    """{(output, input): block} by forward mode, the columns of every input in ``wrt`` at once,
    of the ``outputs`` named (None: all)."""
    outputs = {o: e for o, e in t.outputs.items() if outputs is None or o in outputs}
    Y, X = t.stacked(wrt, outputs)
    J = ca.jtimes(Y, X, ca.diagcat(*[t.directions[w] for w in wrt]))
    blocks, r = {}, 0
    for o, e in outputs.items():
        c = 0
        for w in wrt:
            blocks[o, w] = J[r:r + e.numel(), c:c + t.ncols(w)]
            c += t.ncols(w)
        r += e.numel()
    return blocks


def analytic_unfit(robot, constraints):
    """What the analytical derivatives (sweeps/rnea_derivatives.py, dynamics_derivatives.py) were
    not written for, or None: they run on the tree in local coordinates with world or local
    constraint rows whose K does not depend on q.  Ball joints, MuJoCo's free-joint velocities
    and world-aligned rows (K turned by q) take forward mode instead ("auto")."""
    if any(b.joint.kind == "ball" for b in robot.bodies):
        return "ball joints"
    if any(getattr(b.joint, "velocity", "local") != "local" for b in robot.bodies):
        return "MuJoCo's free-joint velocities"
    if constraints.world:
        return "world-aligned constraint rows"
    return None


def _jacobian_blocks(t, method):
    """{(output, input): block} and {input: "analytic" | "ad"}: the algorithm's analytical
    blocks (method "analytic" or "auto"), forward mode for the blocks it leaves out."""
    blocks, algo = {}, t.algo
    # the analytical derivatives differentiate by q and the vectors; runtime K_<link> by forward mode
    analytic_wrt = tuple(w for w in t.wrt if w == "q" or w in VECTOR_INPUTS)
    unfit = analytic_unfit(t.robot, t.constraints)
    if method == "analytic" and unfit:
        raise DelassusError(f"the analytical derivatives do not take {unfit}: use method 'ad' or 'auto'")
    if method != "ad" and algo.derivative is not None and analytic_wrt and not unfit:
        vectors = {n: s for n, s in t.symbols.items() if n in VECTOR_INPUTS}
        try:
            given = algo.derivative(t.robot, t.constraints, t.symbols["q"], t.K_bodies, analytic_wrt, **vectors)
        except ConstraintError:     # pv_early's redundant rows: a singular KKT matrix, forward mode below
            if method == "analytic":
                raise
            given = {}
        for o, e in t.outputs.items():
            for w in analytic_wrt:
                block = given.get(f"d{o}_d{w}")
                if block is not None:
                    if tuple(block.shape) != (e.numel(), t.ncols(w)):
                        raise DelassusError(f"{algo.name}'s analytical d{o}_d{w} is {block.shape[0]} x {block.shape[1]}, "
                                            f"expected {e.numel()} x {t.ncols(w)}")
                    blocks[o, w] = block
    elif method == "analytic" and algo.derivative is None:
        raise DelassusError(f"algorithm {algo.name!r} has no analytical derivatives: use method 'ad' or 'auto'")
    analytic = set(blocks)
    missing = [w for w in t.wrt if any((o, w) not in blocks for o in t.outputs)]
    if missing:
        left = [o for o in t.outputs if any((o, w) not in blocks for w in missing)]
        blocks.update({k: v for k, v in _ad_jacobian(t, missing, left).items() if k not in blocks})
    return blocks, {w: _used(t.outputs, w, analytic) for w in t.wrt}


def _used(outputs, w, analytic):
    """How the blocks of input ``w`` were made: "analytic", "ad", or "analytic (ad: <outputs>)"
    (pv_early's pivot has no analytical block)."""
    ad = [o for o in outputs if (o, w) not in analytic]
    return "analytic" if not ad else "ad" if len(ad) == len(outputs) else f"analytic (ad: {', '.join(ad)})"


class _Traced:
    """The algorithm's function over fresh symbols, with what every mode needs."""

    def __init__(self, robot, constraints, algorithm, wrt):
        self.robot, self.constraints, self.algo = robot, constraints, get_algorithm(algorithm)
        self.symbols, self.outputs, self.K_bodies = traced_outputs(robot, constraints, algorithm)
        self.wrt = resolve_wrt(list(self.symbols), wrt)
        self.inputs = describe_inputs(robot, constraints, algorithm)
        self.spec = {i["name"]: i for i in self.inputs}
        self.shape = {o: (int(e.shape[0]), int(e.shape[1])) for o, e in self.outputs.items()}
        self.directions = {w: _direction(robot, w, self.symbols[w]) for w in self.wrt}

    def ncols(self, w):
        return int(self.directions[w].shape[1])

    def rows(self, shape):
        """The constraint row names of an output or input of this shape, if it has m rows."""
        return self.constraints.row_names if shape[0] == self.constraints.m else None

    def meaning(self, o):
        return self.algo.outputs.get(o, o)

    def stacked(self, wrt, outputs=None):
        """(the entries of ``outputs`` ({name: SX}; default every output) as one column, the
        entries of the inputs ``wrt`` as one)."""
        outputs = self.outputs if outputs is None else outputs
        return (ca.vertcat(*[ca.vec(ca.densify(e)) for e in outputs.values()]),
                ca.vertcat(*[ca.vec(self.symbols[w]) for w in wrt]))


class _Implicit:
    """JVPs and VJPs of a hard solver's (v̇, λ) by the implicit-function theorem, for algorithms
    whose fixed elimination order AD would differentiate through (registry.Algorithm.kkt_solve):
    with r(x, y) the KKT residual (sweeps/dynamics_derivatives.kkt_residual) at y = (v̇, λ),

        ẏ = KKT⁻¹ (−∂r/∂x ẋ),     x̄ = −(∂r/∂x)ᵀ w,  w = KKT⁻ᵀ ȳ = [w₁; −w₂'],  [w₁; w₂'] = KKT⁻¹ [v̇̄; −λ̄]

    (KKTᵀ = diag(1, −1) KKT diag(1, −1)).  ∂r/∂x is CasADi's forward or reverse mode through
    the RNEA and the constraint rows with y held fixed, the solves the algorithm's kkt_solve
    (traced once on symbols b and substituted); every other output (pv_early's pivot) is
    differentiated by AD as usual."""

    def __init__(self, t):
        self.t = t
        s, o = t.symbols, t.outputs
        self.y = [ca.SX.sym("vdot_fixed", *o["vdot"].shape), ca.SX.sym("lam_fixed", *o["lam"].shape)]
        self.nv = t.robot.nv
        self.b = ca.SX.sym("b_tau", self.nv), ca.SX.sym("b_k", *o["lam"].shape)
        # first: it raises a ConstraintError where the KKT matrix is singular (redundant rows)
        self.solution = ca.vertcat(*t.algo.kkt_solve(t.robot, t.constraints, s["q"], t.K_bodies, *self.b))
        k = s["k"] - world_row_drift(t.robot, t.constraints, s["q"], s["v"]) if t.constraints.world else s["k"]
        tree = Tree(t.robot, t.constraints, s["q"], t.K_bodies)
        self.r = kkt_residual(tree, s["v"], s["tau"], k, *self.y)
        self.others = {n: e for n, e in o.items() if n not in ("vdot", "lam")}
        self.rest = t.stacked((), self.others)[0]          # their entries, one column, for AD

    def _at_solution(self, e):
        return ca.substitute(e, ca.vertcat(*self.y), ca.vertcat(self.t.outputs["vdot"], self.t.outputs["lam"]))

    def _solve(self, b_tau, b_k):
        """KKT⁻¹ [b_τ; b_k] as (v̇ part, λ part)."""
        x = ca.substitute(self.solution, ca.vertcat(*self.b), ca.vertcat(b_tau, b_k))
        return x[:self.nv], x[self.nv:]

    def jvp(self, X, V):
        """Each output's directional derivative along V (stored coordinates of X), a column
        each, in the outputs' order."""
        rdot = self._at_solution(ca.jtimes(self.r, X, V))
        vdot, lam = self._solve(-rdot[:self.nv], -rdot[self.nv:])
        out = {"vdot": vdot, "lam": lam}
        if self.others:
            out.update(zip(self.others, _split(ca.jtimes(self.rest, X, V), [(e.numel(), 1) for e in self.others.values()])))
        return [ca.vec(out[n]) for n in self.t.outputs]

    def vjp(self, X, bars):
        """Σ (∂output/∂X)ᵀ bar over the outputs ({output: its seed}), stored coordinates."""
        w1, w2 = self._solve(ca.vec(bars["vdot"]), -ca.vec(bars["lam"]))
        xbar = -self._at_solution(ca.jtimes(self.r, X, ca.vertcat(w1, -w2), True))
        if self.others:
            xbar = xbar + ca.jtimes(self.rest, X, ca.vertcat(*[ca.vec(bars[n]) for n in self.others]), True)
        return xbar


def implicit_fit(t, method):
    """Whether ``t``'s JVP and VJP go by the implicit-function theorem (``_Implicit``): the
    algorithm has a kkt_solve, the method is "auto", and no free joint takes MuJoCo's
    velocities (kkt_residual was checked against finite differences on Pinocchio's layout
    only; MuJoCo's takes AD through the algorithm, as it did before)."""
    return (method == "auto" and t.algo.kkt_solve is not None
            and all(getattr(b.joint, "velocity", "local") == "local" for b in t.robot.bodies))


def _jvp(t, blocks, implicit=None):
    seeds = {f"{w}_dot": ca.SX.sym(f"{w}_dot", t.ncols(w)) if w == "q" else ca.SX.sym(f"{w}_dot", *t.symbols[w].shape)
             for w in t.wrt}
    if blocks is not None:
        flat = [sum((ca.mtimes(blocks[o, w], ca.vec(seeds[f"{w}_dot"])) for w in t.wrt), ca.SX(e.numel(), 1))
                for o, e in t.outputs.items()]
    else:
        Y, X = t.stacked(t.wrt)
        V = ca.vertcat(*[ca.mtimes(t.directions[w], ca.vec(seeds[f"{w}_dot"])) for w in t.wrt])
        flat = implicit.jvp(X, V) if implicit else _split(ca.jtimes(Y, X, V), [(e.numel(), 1) for e in t.outputs.values()])
    results = {f"{o}_dot": ca.reshape(y, *t.shape[o]) for o, y in zip(t.outputs, flat)}
    seed_specs = [{"name": f"{w}_dot", "shape": [t.ncols(w)] if w == "q" else t.spec[w]["shape"],
                   "meaning": "tangent direction of q (nv): q moves as q ⊕ ε q_dot" if w == "q"
                   else f"direction of {w} (its shape)"} for w in t.wrt]
    out_specs = [{"name": f"{o}_dot", "shape": list(t.shape[o]), "row_names": t.rows(t.shape[o]),
                  "meaning": f"directional derivative along the seeds of {o}: {t.meaning(o)}"} for o in t.outputs]
    return seeds, results, seed_specs, out_specs


def _vjp(t, blocks, implicit=None):
    seeds = {f"{o}_bar": ca.SX.sym(f"{o}_bar", *t.shape[o]) for o in t.outputs}
    if blocks is not None:
        raw = [sum((ca.mtimes(blocks[o, w].T, ca.vec(seeds[f"{o}_bar"])) for o in t.outputs), ca.SX(t.ncols(w), 1))
               for w in t.wrt]
    else:
        Y, X = t.stacked(t.wrt)
        Ybar = ca.vertcat(*[ca.vec(s) for s in seeds.values()])
        xbar = implicit.vjp(X, {o: seeds[f"{o}_bar"] for o in t.outputs}) if implicit else ca.jtimes(Y, X, Ybar, True)
        bars = _split(xbar, [(t.symbols[w].numel(), 1) for w in t.wrt])
        raw = [ca.mtimes(t.directions[w].T, b) for w, b in zip(t.wrt, bars)]
    results = {f"{w}_bar": x if w == "q" else ca.reshape(x, *t.symbols[w].shape) for w, x in zip(t.wrt, raw)}
    seed_specs = [{"name": f"{o}_bar", "shape": list(t.shape[o]), "meaning": f"adjoint seed of {o}"} for o in t.outputs]
    out_specs = [{"name": f"{w}_bar", "shape": [t.ncols(w)] if w == "q" else t.spec[w]["shape"],
                  "row_names": None if w == "q" else t.rows(t.spec[w]["shape"]),
                  "meaning": f"Σ over the outputs of (∂output/∂{w})ᵀ output_bar"
                             + (" (nv: a cotangent of q's tangent space)" if w == "q" else "")} for w in t.wrt]
    return seeds, results, seed_specs, out_specs


def _jacobian(t, blocks, implicit=None):
    results = {f"d{o}_d{w}": blocks[o, w] for o in t.outputs for w in t.wrt}
    out_specs = [{"name": f"d{o}_d{w}", "shape": [_numel(t.shape[o]), t.ncols(w)],
                  "row_names": t.rows(t.shape[o]) if t.shape[o][1] == 1 else None,
                  "meaning": f"Jacobian of {o} ({'x'.join(map(str, t.shape[o]))}, entries column-major) with respect "
                             f"to {w}" + (" in the tangent space (nv columns)" if w == "q" else "")}
                 for o in t.outputs for w in t.wrt]
    return {}, results, [], out_specs


_MODES = {"jvp": _jvp, "vjp": _vjp, "jacobian": _jacobian}


def trace_derivative(robot, constraints, algorithm, derivative, wrt=None, name=None, cse=True, method="auto"):
    """The ``derivative`` ("jvp", "vjp", "jacobian") of ``algorithm``'s function with respect
    to the inputs ``wrt`` (None: all).  Returns (Function, description of inputs, of outputs,
    record) with the record {"mode", "wrt", "inputs" (every differentiable input), "method"
    per input, "tangent"} for the manifest.  ``method``: "ad" (CasADi's AD), "analytic" (the
    algorithm's analytical Jacobian blocks, products of them for JVP/VJP), "auto" (analytic
    for Jacobians where the algorithm has it, AD otherwise)."""
    check_request(derivative, method)
    _uncoupled(robot, "--derivative")
    what = f"the {derivative} of {algorithm} for {robot.name} (nv = {robot.nv}, m = {constraints.m})"
    with step(f"tracing {what}"):
        t = _Traced(robot, constraints, algorithm, wrt)
        blocks, used, implicit = None, {w: "ad" for w in t.wrt}, None
        if derivative == "jacobian" or method == "analytic":
            blocks, used = _jacobian_blocks(t, method)
        elif implicit_fit(t, method):
            try:
                implicit, used = _Implicit(t), {w: "implicit" for w in t.wrt}
            except ConstraintError:         # redundant rows: no implicit function; AD through the algorithm
                pass
        seeds, results, seed_specs, out_specs = _MODES[derivative](t, blocks, implicit)
    f = function_of(name or f"{algorithm}_{derivative}", {**t.symbols, **seeds}, results, cse, what)
    record = {"mode": derivative, "wrt": list(t.wrt), "inputs": list(t.symbols), "method": used, "tangent": TANGENT_RULE}
    return f, t.inputs + seed_specs, out_specs, record


# -- CasADi's own derivative functions, for casadi.external ------------------------------------
def casadi_companions(f, cse=True):
    """``f``'s derivatives under the names and calling conventions ``casadi.external`` looks
    up in the library that holds f (casadi/core/external.cpp): ``fwd1_<f>`` (f's inputs, its
    outputs ``out_<o>``, one forward seed ``fwd_<i>`` per input -> ``fwd_<o>``), ``adj1_<f>``
    (inputs, outputs, one adjoint seed ``adj_<o>`` per output -> ``adj_<i>``) and ``jac_<f>``
    (inputs, outputs -> every block ``jac_<o>_<i>``, dense, by forward mode), then
    ``fwd1_adj1_<f>``, adj1_'s own forward companion: forward over reverse, what CasADi asks
    an external for when it builds an exact Hessian (IPOPT's default).  They differentiate f
    in its stored coordinates, as CasADi does everywhere (a quaternion's four entries are four
    independent numbers), not in the tangent space."""
    first = _companions(f, cse, ("fwd1", "adj1", "jac"))
    return [*first, *_companions(first[1], cse, ("fwd1",))]


def _companions(f, cse, kinds):
    """The companions of ``f`` named by ``kinds`` (of "fwd1", "adj1", "jac"; see casadi_companions)."""
    name, names_in, names_out = f.name(), f.name_in(), f.name_out()
    x = f.sx_in()
    y = [ca.densify(e) for e in f.call(x)]
    Y, X = ca.vertcat(*[ca.vec(e) for e in y]), ca.vertcat(*[ca.vec(e) for e in x])
    nominal = [ca.SX.sym(f"out_{o}", f.sparsity_out(k)) for k, o in enumerate(names_out)]
    shapes_in = [(int(f.size1_in(k)), int(f.size2_in(k))) for k in range(f.n_in())]
    shapes_out = [(int(f.size1_out(k)), int(f.size2_out(k))) for k in range(f.n_out())]

    def function(fname, seeds, seed_names, exprs, out_names):
        exprs = ca.cse(exprs) if cse else exprs
        return ca.Function(fname, [*x, *nominal, *seeds], exprs,
                           [*names_in, *(f"out_{o}" for o in names_out), *seed_names], out_names)

    def fwd1():
        seeds = [ca.SX.sym(f"fwd_{i}", *shape) for i, shape in zip(names_in, shapes_in)]
        fwd = _split(ca.jtimes(Y, X, ca.vertcat(*[ca.vec(s) for s in seeds])), shapes_out)
        return function(f"fwd1_{name}", seeds, [f"fwd_{i}" for i in names_in], fwd, [f"fwd_{o}" for o in names_out])

    def adj1():
        seeds = [ca.SX.sym(f"adj_{o}", *shape) for o, shape in zip(names_out, shapes_out)]
        adj = _split(ca.jtimes(Y, X, ca.vertcat(*[ca.vec(s) for s in seeds]), True), shapes_in)
        return function(f"adj1_{name}", seeds, [f"adj_{o}" for o in names_out], adj, [f"adj_{i}" for i in names_in])

    def jac():
        J = ca.jtimes(Y, X, ca.SX.eye(X.numel()))
        rows = [0, *itertools.accumulate(r * c for r, c in shapes_out)]
        cols = [0, *itertools.accumulate(r * c for r, c in shapes_in)]
        blocks = [J[rows[a]:rows[a + 1], cols[b]:cols[b + 1]] for a in range(len(names_out)) for b in range(len(names_in))]
        return function(f"jac_{name}", [], [], blocks, [f"jac_{o}_{i}" for o in names_out for i in names_in])
    makers = {"fwd1": fwd1, "adj1": adj1, "jac": jac}
    return [makers[k]() for k in kinds]


def _uncoupled(robot, what):
    """A DelassusError for coupled mimic joints: the tangent space (model/integrate.py) is the full one."""
    if getattr(robot, "coupling", None) is not None:
        raise DelassusError(f"{what}: robot {robot.name!r} has coupled mimic joints (mimic=True, --mimic), and "
                            f"tangent-space derivatives run over independent joints; differentiate the value "
                            f"function with CasADi (casadi_function) instead")


def tangent_function(f, robot):
    """``f`` with q moved along a tangent vector: inputs (q, dq, the others), outputs f(q ⊕ dq, …)
    (model/integrate.py).  CasADi's derivatives of it with respect to dq at dq = 0 are the
    tangent-space derivatives; those with respect to q are the stored coordinates' again."""
    _uncoupled(robot, "tangent=True")
    x = f.sx_in()
    dq = ca.SX.sym("dq", robot.nv)
    moved = f.call([integrate_sx(robot, x[0], dq), *x[1:]])
    return ca.Function(f.name(), [x[0], dq, *x[1:]], moved, [f.name_in(0), "dq", *f.name_in()[1:]], f.name_out())
