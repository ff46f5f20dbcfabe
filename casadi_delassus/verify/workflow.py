"""The check workflow: compile each algorithm for a target, compare it with the oracles, and
return one typed row per algorithm and oracle (``CheckRow``) or per derivative
(``DerivativeRow``).  ``casadi-delassus check`` prints these rows and ``api.check`` returns
their outcomes, so the command and the Python call run the same comparison.

Building is the caller's: it passes ``generate`` (api.generate with its output folder and
flags bound), since verify/ sits below the API (tests/project/test_imports.py).  The tolerance rule is
verify/check.py's; the derivative rules are verify/derivatives.py's and
verify/derivative_oracle.py's."""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from . import precision as precision_check
from .check import FunctionSession, compare
from .derivative_oracle import PIN_TOL, not_comparable, pinocchio_errors
from .derivatives import DOT_TOL, PIVOT_MIN, Checkable, compare_derivative, dot_errors, dot_products, evaluate
from ..codegen.build import gives_osim
from ..errors import DelassusError
from ..progress import step
from ..registry import AUTO, get_algorithm

OK, FAIL = "ok", "FAIL"


@dataclass
class CheckRow:
    """One algorithm against one oracle: the output closest to failing (``output``), its largest
    relative ``error``, its worst error/allowed with κ there (``ratio``), the ``others`` and
    what could not be compared, and ``result`` (ok, FAIL, n/a, skipped); ``outcome`` is the
    verify/check.Outcome behind it (None where nothing was compared)."""
    robot: str
    scenario: str
    algorithm: str
    oracle: str
    m: int
    instructions: int | None
    output: str | None
    error: float | None
    ratio: str | None
    others: str | None
    result: str
    seconds: float
    outcome: object = field(default=None, repr=False)

    @property
    def passed(self):
        """Not failed: n/a and skipped rows do not fail a check (they say why instead)."""
        return self.result != FAIL

    def cells(self):
        """The printed cells, in HEADERS order."""
        return [getattr(self, f.name) for f in fields(self)][:len(HEADERS)]


HEADERS = ["robot", "scenario", "algorithm", "oracle", "m", "instructions", "output", "max rel. error",
           "worst error/allowed (κ there)", "other outputs", "result", "s"]


@dataclass
class DerivativeRow:
    """One derivative of one algorithm against central finite differences (``error`` of the
    worst ``output``), the dot-product test of a JVP/VJP pair (``dot``) and Pinocchio's
    derivatives (``pinocchio``: the error, or why there is none)."""
    robot: str
    scenario: str
    algorithm: str
    derivative: str | None
    wrt: str | None
    instructions: int | None
    times_value: float | None
    output: str | None
    error: float | None
    dot: str | None
    pinocchio: str | None
    result: str
    seconds: float

    @property
    def passed(self):
        return not self.result.startswith(FAIL)

    def cells(self):
        return [getattr(self, f.name) for f in fields(self)]


def derivative_headers(samples):
    """DerivativeRow's printed headers."""
    return ["robot", "scenario", "algorithm", "derivative", "wrt", "instructions", "× value", "worst output",
            f"max rel. error vs FD ({samples} points)", "dot test (rounding scale)", "vs Pinocchio", "result", "s"]


def single_tolerance(f, tol):
    """The oracles' tolerance for ``f``: ``tol``, and for a single-precision function at least
    its stored error bound times verify/precision.CHECK_FACTOR (a CUDA function's: codegen/cuda's
    ERROR_MARGIN; κ scales it as it scales tol)."""
    from ..codegen.cuda import ERROR_MARGIN
    p = f.precision
    factor = ERROR_MARGIN if f.manifest.get("target") == "cuda" else precision_check.CHECK_FACTOR
    return max(tol, factor * p["max_rel_error"]) if p["type"] == "single" else tol


def against_double(f, samples, seed):
    """{"worst", "allowed", "passed", "samples"} of the single-precision ``f`` against its double build."""
    double = f.double_twin()
    worst, allowed, passed = precision_check.within_bound(
        f, double.outputs, precision_check.random_samples(f, f.robot, f.constraints, samples, seed))
    return {"worst": worst, "allowed": allowed, "passed": passed, "samples": samples}


def _not_applicable(reasons):
    """"a, b n/a (reason)" per reason, for the outputs an oracle could not compare."""
    by_reason = {}
    for output, reason in reasons.items():
        by_reason.setdefault(reason, []).append(output)
    return "; ".join(f"{', '.join(outs)} n/a ({reason})" for reason, outs in by_reason.items())


def oracle_rows(f, sessions, samples, tol, seed=0, algorithm=None, label=None, t0=None):
    """A CheckRow of ``f`` (a generated function with .robot and .constraints) against each of
    ``sessions`` ({oracle: session, or the DelassusError that stopped it}) over ``samples``
    random inputs within ``tol`` (verify/check.py's rule); ``label``: the algorithm column
    (default ``algorithm``, default the manifest's function)."""
    robot, cs, t0 = f.robot, f.constraints, time.perf_counter() if t0 is None else t0
    algorithm = algorithm or f.manifest["function"]
    head = dict(robot=robot.name, scenario=f.manifest["scenario"], algorithm=label or algorithm, m=cs.m,
                instructions=f.manifest["op_count"]["instructions"])
    rows = []
    for o, session in sessions.items():
        if isinstance(session, DelassusError):
            rows.append(CheckRow(**head, oracle=o, output=None, error=None, ratio=None,
                                 others=f"oracle failed: {session}", result=FAIL, seconds=0.0))
            continue
        with step(f"checking {algorithm} for {robot.name}/{head['scenario']} against {o} over {samples} samples"):
            results = compare(f, robot, cs, samples=samples, seed=seed, tol=tol, oracle=session)
        rows.append(_oracle_row(head, o, results, samples, t0))
    return rows


def _oracle_row(head, oracle, results, samples, t0):
    """The CheckRow of one Outcome: its worst output, or n/a when the oracle compared nothing."""
    not_applicable = "; ".join(filter(None, [_not_applicable(results.not_applicable), *(
        f"{k} skipped at {n} of {samples} samples ({why})" for k, (n, why) in results.skipped.items())]))
    seconds = round(time.perf_counter() - t0, 1)
    if not results:    # the oracle had no answer for any output (e.g. redundant hard constraints)
        return CheckRow(**head, oracle=oracle, output=None, error=None, ratio=None, others=not_applicable or "n/a",
                        result="n/a", seconds=seconds, outcome=results)
    worst = max(results, key=lambda k: results[k].ratio)        # the failing output, or the closest to it
    c = results[worst]
    others = ", ".join([f"{k} {v.error:.1e}" for k, v in results.items() if k != worst]
                       + ([not_applicable] if not_applicable else [])) or None
    return CheckRow(**head, oracle=oracle, output=worst, error=c.error, ratio=f"{c.ratio:.2g} (κ {c.kappa:.1e})",
                    others=others, result=OK if results.passed else FAIL, seconds=seconds, outcome=results)


def _skipped(robot, scenario, algorithm, m, why):
    return CheckRow(robot.name, scenario, algorithm, "-", m, None, None, None, None, why, "skipped", 0.0)


def _precision_row(f, algorithm, t0):
    """The row of a single-precision function against its double build."""
    with step(f"checking {algorithm} in single precision against its double build"):
        c = against_double(f, precision_check.SAMPLES, 1)
    return CheckRow(f.robot.name, f.manifest["scenario"], algorithm, "double build", f.constraints.m,
                    f.op_count["instructions"], "all", c["worst"], f"{c['worst'] / c['allowed']:.2g} (of the stored "
                    f"bound × {c['allowed'] / f.precision['max_rel_error']:g})", f"{c['samples']} fresh samples",
                    OK if c["passed"] else FAIL, round(time.perf_counter() - t0, 1))


def cuda_built(m):
    """Whether nvcc built the device library of the CUDA manifest ``m`` and whether it can run here."""
    from ..runtime.cuda import has_device
    nvcc = m.get("nvcc")
    if not nvcc:
        return "not built: no nvcc here (the .cu is written)"
    regs = f"nvcc: {nvcc['registers']} registers, {nvcc['spill_stores_bytes']} B spill stores"
    return f"built ({regs}), " + ("runs on the CUDA device here" if has_device() else "not run: no CUDA device here")


def host_check_text(m):
    """What the manifest's host_check says: the host build's error against the C path."""
    c = m.get("host_check", {})
    if "max_rel_error" not in c:
        return f"host build not checked: {c.get('not_run', 'no record')}"
    what = "host build (float) equals C (double)" if m["precision"]["type"] == "single" else "host build equals C"
    return f"{what} to {c['max_rel_error']:.1e} (max rel. error over {c['samples']} samples)"


def _cuda_host(robot, constraints, algorithm, generate, target, folder):
    """(the host build of ``algorithm``'s CUDA form, loaded; the oracle session of its C function)."""
    from ..codegen.cuda import host_function
    g = generate(robot, constraints, algorithm, target="cuda", precision=target.precision, layout=target.layout)
    with step(f"building the host form of {g.manifest_path.with_suffix('.cu').name} (C++ through the shim)"):
        h = host_function(g.manifest_path, Path(folder) / f"{g.manifest_path.stem}-{target.layout}.so")
        h._entry()              # loaded now: the folder is a temporary one
    h.robot, h.constraints = g.robot, g.constraints
    note = (f"{algorithm}: {g.manifest_path.with_suffix('.cu')} {cuda_built(g.manifest)}; rows 'C target' and "
            f"the oracles check its host build (C++ through the shim); at build, {host_check_text(g.manifest)}")
    return h, FunctionSession(robot, g.constraints, g.c_function, note)


def check_scenario(robot, cs, scenario, constraints, algorithms, sessions, samples, tol, generate, target, osim=False):
    """(CheckRows, {oracle: notes}) of each algorithm for one constraint set ``cs`` (``constraints``:
    what ``generate`` is given for it) against ``sessions`` ({oracle: session or DelassusError});
    ``target`` (codegen/target.Target): in single precision also a row against the double
    build; CUDA: the host build of each CUDA form against the C target's function (row 'C
    target') and the oracles."""
    rows, notes = [], {}
    for a in algorithms:
        t0 = time.perf_counter()
        if a != AUTO and not get_algorithm(a).accepts(cs):     # e.g. `check registry -a all` on Cassie's loops
            rows.append(_skipped(robot, scenario, a, cs.m, "n/a: link-to-link or joint rows"))
            continue
        if osim and not gives_osim(a):                         # `check -a all --osim`: the dynamics solvers
            rows.append(_skipped(robot, scenario, a, cs.m, "n/a: --osim needs a Delassus output"))
            continue
        checks, label = sessions, a
        with tempfile.TemporaryDirectory() as folder:
            if target.target == "cuda":
                f, c_target = _cuda_host(robot, constraints, a, generate, target, folder)
                checks, label = {"C target": c_target, **sessions}, f"{a} (cuda host)"
                notes.setdefault("C target", []).extend(c_target.notes)
            else:
                f = generate(robot, constraints, a, precision=target.precision)
        if target.precision == "single" and target.target == "c":
            rows.append(_precision_row(f, a, t0))
        rows += oracle_rows(f, checks, samples, single_tolerance(f, tol), algorithm=a, label=label, t0=t0)
    return rows, {o: s.notes for o, s in sessions.items() if not isinstance(s, DelassusError)} | notes


def check_derivatives(robot, cs, scenario, constraints, algorithms, derivatives, wrt, method, samples, tol, generate):
    """A DerivativeRow per algorithm and derivative: against central finite differences of the
    compiled value function on the manifold, the dot-product test of a JVP/VJP pair, and
    Pinocchio's derivatives for a Jacobian."""
    rows = []
    for a in algorithms:
        if a != AUTO and not get_algorithm(a).accepts(cs):
            rows.append(DerivativeRow(robot.name, scenario, a, *[None] * 8, "skipped", 0.0))
            continue
        value = generate(robot, constraints, a)
        made = {}
        for d in derivatives:
            t0 = time.perf_counter()
            f = generate(robot, constraints, a, derivative=d, wrt=wrt, method=method)
            made[d] = checkable = Checkable.compiled(f)
            rows.append(_derivative_row(robot, scenario, a, d, f, value, made, samples, tol, t0))
    return rows


def _derivative_row(robot, scenario, a, d, f, value, made, samples, tol, t0):
    """The DerivativeRow of the compiled derivative ``f`` (made[d]) of ``value``."""
    checkable, skipped = made[d], []
    with step(f"checking the {d} of {a} for {robot.name}/{scenario} against finite differences over {samples} samples"):
        results = compare_derivative(checkable, value, robot, value.constraints, samples, tol=tol, skipped=skipped)
    worst = max(results, key=lambda k: results[k].ratio)
    dot = scaled = None
    if d == "vjp" and "jvp" in made:
        dot, scaled = dot_errors(dot_products(made["jvp"], checkable, robot, value.constraints, samples, value=value))
    oracle = _against_pinocchio(f, robot, value.constraints, a, samples) if d == "jacobian" else None
    passed = all(c.passed for c in results.values()) and (dot is None or dot <= DOT_TOL) \
        and not (isinstance(oracle, float) and oracle > PIN_TOL)
    base = value.op_count["instructions"]
    return DerivativeRow(
        robot.name, scenario, a, d, ",".join(checkable.record["wrt"]), f.op_count["instructions"],
        round(f.op_count["instructions"] / base, 2), worst, results[worst].error,
        None if dot is None else f"{dot:.1e} ({scaled:.1e})", oracle if not isinstance(oracle, float) else f"{oracle:.1e}",
        (OK if passed else FAIL) + (f" ({len(skipped)} points with conditioning < {PIVOT_MIN:g} redrawn)" if skipped else ""),
        round(time.perf_counter() - t0, 1))


def _against_pinocchio(f, robot, constraints, algorithm, samples):
    """The worst error of the compiled Jacobian ``f`` against Pinocchio's derivatives, or why
    there is no comparison (verify/derivative_oracle.py)."""
    why = not_comparable(algorithm, f.manifest["derivative"]["wrt"])
    if why:
        return f"n/a ({why})"
    try:
        with step(f"checking the jacobian of {algorithm} for {robot.name} against Pinocchio over {samples} samples"):
            worst, k_err = pinocchio_errors(lambda x: evaluate(f, x), robot, constraints, algorithm, samples)
    except ImportError:
        return "no pinocchio"
    except DelassusError as exc:        # a model or constraint Pinocchio's derivatives do not take
        return f"n/a ({exc})"
    return max(*worst.values(), k_err)
