"""The ``casadi-delassus`` command (also ``python -m casadi_delassus``)."""
from __future__ import annotations

import functools
import math
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

import click
import numpy as np

from . import api, report
from .registry import ALGORITHMS, AUTO, AUTO_RULE, get_algorithm
from .verify.check import DEFAULT_TOL, KAPPA_FREE, TOLERANCE_RULE, FunctionSession, check_delassus, compare
from .verify import oracles
from .verify.derivatives import (DOT_TOL, FD_RULE, FD_TOL, PIVOT_MIN, Checkable, compare_derivative, dot_errors,
                                 dot_products, evaluate)
from .verify.derivative_oracle import PIN_RULE, PIN_TOL, not_comparable, pinocchio_errors
from .codegen.build import DEFAULT_CFLAGS, check_osim, gives_osim
from .codegen.precision import PRECISIONS
from .runtime.door import DoorWarning
from .opcount import count_ops
from .codegen.derivatives import DERIVATIVES, METHODS, trace_derivative
from .codegen.trace import choose_cheapest, trace
from .simulation.simulate import BAUMGARTE
from .errors import DelassusError, InputError, OutputError
from .executor import Job, in_order, run
from .model import FORMATS, load_robot, registry
from .names import printable
from .progress import step

_robot_arg = click.argument("robot")
# --samples of `check` and `step`: each sample is a compiled call and an oracle's (NumPy, Pinocchio: up to tens of ms
# on the big robots), so these are about an hour of work at most; more is a mistake, not a check
CHECK_MAX_SAMPLES, STEP_MAX_SAMPLES = 100_000, 10_000
ROBOT_HELP = f"ROBOT is {FORMATS}."
_base_opt = click.option("--fixed-base/--floating-base", "fixed_base", default=None,
                         help="fix a URDF model's root link to the world, or put it on a free base (default: the "
                              "model's own: URDF files float, registry robots as listed by `robots`); the output "
                              "folder name says which")
_mimic_opt = click.option("--mimic", is_flag=True,
                          help="couple a URDF model's mimic joints as Pinocchio's mimic=True does (q and v without "
                               "them; algorithm naive only); the output folder name says _mimic")
_scenario_opt = click.option("--scenario", "-s", help="named constraint scenario of the robot (default: its first)")
_constraint_opt = click.option("-c", "--constraint", "specs", multiple=True, metavar="SPEC",
                               help="constraint LINK:6d, LINK:3d[@x,y,z], world-aligned rows LINK:6d-world, LINK:3d-world[@x,y,z], "
                                    "LINK:random6|random3, LINK:6d-input|3d-input, link-to-link A|B:6d, "
                                    "A|B:3d[@ax,ay,az[;bx,by,bz]], joint rows JOINT:NAME (repeatable; `links ROBOT` "
                                    "lists the names)")
_algo_opt = click.option("-a", "--algorithm", "algorithms", multiple=True, metavar="ALGO",
                         help=f"algorithm(s): {', '.join(ALGORITHMS)}, 'auto' (the default) or 'all'.  {AUTO_RULE}")
_cse_opt = click.option("--cse/--no-cse", default=True, show_default=True, help="apply CasADi's common-subexpression elimination")
_jobs_opt = click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
                         help="independent jobs on N local processes (default: every core; 1: one by one in this process)")
_osim_opt = click.option("--osim", is_flag=True, help="also output Λ (the OSIM) through an LDLᵀ of the Delassus matrix")
_derivative_opts = [
    click.option("--derivative", "derivatives", multiple=True, type=click.Choice([*DERIVATIVES, "all"]),
                 help="the derivative instead of the value (repeatable; 'all': jvp, vjp and jacobian): jvp takes seeds "
                      "<input>_dot and returns <output>_dot, vjp takes <output>_bar and returns <input>_bar, jacobian "
                      "returns d<output>_d<input>; q derivatives in the tangent space (q ⊕ δ, the model's integrate)"),
    click.option("--wrt", default=None, metavar="INPUTS",
                 help="comma-separated inputs to differentiate with respect to (q, v, tau, k, R, lam, a, K_<link>; "
                      "default all)"),
    click.option("--derivative-method", "method", type=click.Choice(METHODS), default="auto", show_default=True,
                 help="ad: CasADi's AD; analytic: the algorithm's analytical Jacobians; auto: analytic for Jacobians "
                      "where the algorithm has them")]


def _algorithms(names):
    names = list(names) or [AUTO]
    if "all" in names:
        return list(ALGORITHMS)
    for n in names:
        if n != AUTO:
            get_algorithm(n)
    return names


def _derivatives(names, wrt=None):
    """The derivatives asked for; --wrt without one is a usage error (it would be ignored)."""
    if wrt is not None and not names:
        raise click.UsageError("--wrt picks the inputs of a derivative: give --derivative too")
    return list(DERIVATIVES) if "all" in names else list(dict.fromkeys(names))


def _positive_tolerance(ctx, param, value):
    """A tolerance: finite and above 0 (nan fails every comparison, inf passes anything)."""
    if value is not None and not (0 < value < math.inf):
        raise click.BadParameter(f"{value!r} is not a finite number above 0", ctx=ctx, param=param)
    return value


def _floating(fixed_base):
    return None if fixed_base is None else not fixed_base


def _resolve(robot_spec, scenario, specs, fixed_base=None, say_base=True, mimic=False):
    """(robot, constraint set, scenario name); ``say_base``: the first line of the output says
    which base the robot has and how to change it (output meant for machines leaves it out)."""
    robot = load_robot(robot_spec, floating_base=_floating(fixed_base), mimic=mimic)
    if specs and scenario:
        raise click.UsageError("give either --scenario or -c constraints, not both")
    constraints = list(specs) if specs else (scenario or api.default_constraints(robot))
    cs, name = api.constraint_set(robot, constraints)
    if say_base:
        click.echo(f"{robot.name}: {robot.base_note()}")
    return robot, cs, name


def _with(opts):
    def deco(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return deco


# ROBOT plus how its constraints are chosen: every command that targets one scenario
_target_opts = [_robot_arg, _base_opt, _scenario_opt, _constraint_opt]
_trace_opts = [*_target_opts, _algo_opt, _cse_opt]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """Generate operation-counted, compiled C for Delassus-matrix algorithms.

    ROBOT (every command that takes one) is a registry name (see `robots`), a model file —
    URDF (.urdf, or .xml with a <robot> root; --fixed-base/--floating-base), SDF (.sdf),
    Featherstone spatial_v2 JSON (.json), MJCF (.xml with a <mujoco> root, compiled by MuJoCo
    when the mjcf extra is installed; q = its qpos) — or a synthetic spec such as chain:n=20,
    stem:n=10,branches=4,length=7, kchain:k=5, ladder:rungs=4.  `links ROBOT` lists its joints
    (with the q layout) and the link, frame and site names constraints may use."""


@cli.command()
def robots():
    """List the named robots with their sizes and constraint scenarios."""
    rows = []
    for name in registry.names():
        try:
            r = load_robot(name)
            rows.append([name, r.nq, r.nv, r.n_bodies, r.depth(), ", ".join(r.scenarios)])
        except DelassusError as exc:
            rows.append([name, None, None, None, None, f"unavailable: {exc}"])
    click.echo(report.table(rows, ["robot", "nq", "nv", "bodies", "depth", "scenarios"]))


@cli.command(epilog=ROBOT_HELP)
@_with([_robot_arg, _base_opt])
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def links(robot, fixed_base, fmt):
    """List the model's joints in q order (type, nq, nv, their q and v ranges and q entries) and
    the names constraints may use: bodies, frames (links merged by fixed joints, named frames)
    and sites, each with the body it rides on."""
    from .model.links import FRAME_HEADERS, JOINT_HEADERS, MIMIC_NOTE, describe_links, frame_rows, joint_rows
    info = describe_links(load_robot(robot, floating_base=_floating(fixed_base)))
    if fmt == "json":
        click.echo(report.dumps(info))
        return
    click.echo(printable(f"{info['robot']}: nq = {info['nq']}, nv = {info['nv']}, {info['base']} ({info['source']})"))
    click.echo("joints (q layout):")
    click.echo(report.table(joint_rows(info), JOINT_HEADERS))
    if any(j["mimic"] for j in info["joints"]):
        click.echo(MIMIC_NOTE)
    click.echo("bodies, frames and sites (constraint names, e.g. -c NAME:6d):")
    click.echo(report.table(frame_rows(info), FRAME_HEADERS))


@cli.command(epilog=ROBOT_HELP)
@_with(_trace_opts)
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@_with(_derivative_opts)
@_mimic_opt
def count(robot, fixed_base, scenario, specs, algorithms, cse, fmt, derivatives, wrt, method, mimic):
    """Count the operations of each algorithm (traced, not compiled); with --derivative, of its
    derivatives too (and how many times the value's count they are)."""
    derivatives = _derivatives(derivatives, wrt)
    robot, cs, _ = _resolve(robot, scenario, specs, fixed_base, say_base=fmt == "table", mimic=mimic)
    counts = {}
    for a in _algorithms(algorithms):
        if a == AUTO:
            a, _, reason = choose_cheapest(robot, cs, cse=cse)
            click.echo(f"auto -> {a}: {reason}", err=True)
        f, _, _ = trace(robot, cs, a, cse=cse)
        g, _, _ = trace(robot, cs, a, cse=cse, osim=True)
        counts[a] = dict(count_ops(f), cse=cse, with_osim=count_ops(g))
        for d in derivatives:
            h, _, _, record = trace_derivative(robot, cs, a, d, wrt, cse=cse, method=method)
            c = count_ops(h)
            counts[a].setdefault("derivatives", {})[d] = dict(
                c, wrt=record["wrt"], method=record["method"], times_value=round(c["instructions"] / counts[a]["instructions"], 2))
    if fmt == "json":
        click.echo(report.dumps(report.count_record(robot, cs, counts)))
        return
    if derivatives:
        headers = ["algorithm", "derivative", "wrt", "method", "instructions", "× value", "flops"]
        rows = [[a, d, ",".join(x["wrt"]), ",".join(sorted(set(x["method"].values()))), x["instructions"],
                 x["times_value"], x["flops"]] for a, c in counts.items() for d, x in c["derivatives"].items()]
    else:
        headers = ["algorithm", "instructions", "with Λ (LDLᵀ)", "flops", "add", "mul", "div", "sqrt", "neg"]
        rows = [[a, c["instructions"], c["with_osim"]["instructions"], c["flops"],
                 *(c["ops"][k] for k in ("add", "mul", "div", "sqrt", "neg"))]
                for a, c in counts.items()]
    if fmt == "csv":
        click.echo(report.to_csv(rows, headers))
    else:
        click.echo(printable(f"{robot.name}: nv = {robot.nv}, m = {cs.m} ({', '.join(cs.specs)}), cse = {cse}"))
        click.echo(report.table(rows, headers))


def _cflags(cflags):
    return tuple(cflags.split()) if cflags else DEFAULT_CFLAGS


_gen_opts = [click.option("-o", "--out", "out_dir", default=str(api.DEFAULT_OUT), show_default=True,
                          help="output root; files go to OUT/<name>/<scenario>/ (see --name)"),
             click.option("--cflags", default=None, help="compiler flags (default: 'auto' = -O2, or lower for huge functions)"),
             click.option("--cc", default=None, help="C compiler (default: $CC, gcc, cc, clang)"),
             click.option("--force", is_flag=True, help="regenerate even if the cache is up to date"),
             click.option("--name", default=None, metavar="NAME",
                          help="the model's folder and C name (letters and digits joined by single underscores); "
                               "default: the registry or synthetic name, or a model file's stem plus a hash of its path")]


@cli.command(epilog=ROBOT_HELP)
@_with(_trace_opts)
@_osim_opt
@_with(_gen_opts)
@click.option("--package", "package_dir", default=None, metavar="DIR",
              help="also write a self-contained C package (sources, Makefile, CMakeLists.txt, README, example) to DIR")
@click.option("--stages", is_flag=True,
              help="generate the re-evaluation stages instead: <algo>_factor (q), [<algo>_damping (R),] <algo>_apply, "
                   "each taking the previous stage's stored intermediates")
@_with(_derivative_opts)
@click.option("--casadi-derivatives", is_flag=True,
              help="also compile CasADi's derivative functions (fwd1_/adj1_/jac_<function>) into the .so (<algo>-casadi), "
                   "so that casadi.external(<function>, <so>) is differentiable inside CasADi")
@click.option("--target", type=click.Choice(api.TARGETS), default="c", show_default=True,
              help="cuda: also write <algo>-cuda.cu, a batched CUDA kernel of the C function (docs/gpu.md)")
@click.option("--precision", type=click.Choice(PRECISIONS), default="double", show_default=True,
              help="single: compute in float (C: <algo>-single files; cuda: <algo>-cuda-f32.cu), its error against "
                   "double measured and stored in the manifest (docs/precision.md)")
@click.option("--layout", type=click.Choice(["soa", "aos"]), default="soa", show_default=True,
              help="the CUDA kernel's internal layout: entry-major (soa) or configuration-major (aos)")
@_mimic_opt
def generate(robot, fixed_base, scenario, specs, algorithms, cse, osim, out_dir, cflags, cc, force, name, package_dir, stages,
             derivatives, wrt, method, casadi_derivatives, target, precision, layout, mimic):
    """Generate, compile and load C for each algorithm; print the files."""
    derivatives = _derivatives(derivatives, wrt)
    if precision == "single" and target == "c" and (package_dir or stages):
        raise click.UsageError("--precision single makes functions to call from Python: not with --package or --stages")
    robot, cs, _ = _resolve(robot, scenario, specs, fixed_base, mimic=mimic)
    made, algorithms = [], _algorithms(algorithms)
    for a in algorithms:            # refuse before generating anything
        check_osim(a, osim)
    for a in algorithms:
        for d in derivatives or [None]:
            f = api.generate(robot, cs if specs else (scenario or api.default_constraints(robot)), a,
                             out_dir=out_dir, cflags=_cflags(cflags), cc=cc, cse=cse, force=force, osim=osim,
                             stages=stages, name=name, derivative=d, wrt=wrt, method=method,
                             casadi_derivatives=casadi_derivatives, target=target, precision=precision, layout=layout)
            if target == "cuda":
                for g in f if stages else [f]:
                    _echo_cuda(a, g)
                    made.append(g.c_function)       # --package: the C beside it
                continue
            if stages:
                made += f.stages
                for g in f.stages:
                    m = g.manifest
                    click.echo(f"{a} stage {m['stage']['name']}: {m['op_count']['instructions']:,} instructions, "
                               f"stores {m['outputs'][0]['shape'][0] if m['stage']['work_out'] else 0} values, "
                               f"sz_w {m['sz_w']:,} -> {g.so_path.with_suffix('.{c,h,so,json}')}")
                continue
            made.append(f)
            m = f.manifest
            if "auto" in m:
                click.echo(f"auto -> {m['auto']['chosen']}: {m['auto']['reason']}")
            what = f"{a} {d} with respect to {','.join(m['derivative']['wrt'])}" if d else a
            extra = "".join(f", {c['function']} {c['op_count']['instructions']:,}" for c in m.get("casadi_derivatives", []))
            click.echo(f"{what}: {m['op_count']['instructions']:,} instructions{extra} -> "
                       f"{f.so_path.with_suffix('.{c,h,so,json}')}")
            if precision == "single":
                p = f.precision
                click.echo(f"single precision: error against double max {p['max_rel_error']:.1e}, median "
                           f"{p['median_rel_error']:.1e} over {p['samples']} samples (relative to the largest output entry)")
    if package_dir:
        from .codegen.package import write_package
        write_package(package_dir, made)
        click.echo(f"C package -> {package_dir} (make, or cmake -S {package_dir} -B build; see its README.md)")


def _echo_cuda(algorithm, f):
    """One line per CUDA function: what was built, whether it can run here, and what its host
    build (the shim) was measured against at build."""
    m = f.manifest
    click.echo(f"{algorithm} ({m['function']}): CUDA {m['precision']['type']} {m['layout']}, "
               f"{m['op_count']['instructions']:,} instructions; {_cuda_built(m)}; {_host_check_text(m)} -> "
               f"{f.manifest_path.with_suffix('.cu')}")


def _cuda_built(m):
    """Whether nvcc built the device library of the CUDA manifest ``m`` and whether it can run here."""
    from .runtime.cuda import has_device
    nvcc = m.get("nvcc")
    if not nvcc:
        return "not built: no nvcc here (the .cu is written)"
    regs = f"nvcc: {nvcc['registers']} registers, {nvcc['spill_stores_bytes']} B spill stores"
    return f"built ({regs}), " + ("runs on the CUDA device here" if has_device() else "not run: no CUDA device here")


def _host_check_text(m):
    """What the manifest's host_check says: the host build's error against the C path."""
    c = m.get("host_check", {})
    if "max_rel_error" not in c:
        return f"host build not checked: {c.get('not_run', 'no record')}"
    what = "host build (float) equals C (double)" if m["precision"]["type"] == "single" else "host build equals C"
    return f"{what} to {c['max_rel_error']:.1e} (max rel. error over {c['samples']} samples)"


CHECK_HEADERS = ["robot", "scenario", "algorithm", "oracle", "m", "instructions", "output", "max rel. error",
                 "worst error/allowed (κ there)", "other outputs", "result", "s"]


def _precision_row(f, algorithm, t0):
    """The CHECK_HEADERS row of a single-precision function against its double build."""
    with step(f"checking {algorithm} in single precision against its double build"):
        c = api.check_precision(f)
    return [f.robot.name, f.manifest["scenario"], algorithm, "double build", f.constraints.m,
            f.op_count["instructions"], "all", c["worst"], f"{c['worst'] / c['allowed']:.2g} (of the stored bound × "
            f"{c['allowed'] / f.precision['max_rel_error']:g})", f"{c['samples']} fresh samples",
            "ok" if c["passed"] else "FAIL", round(time.perf_counter() - t0, 1)]


def _not_applicable(reasons):
    """"a, b n/a (reason)" per reason, for the outputs an oracle could not compare."""
    by_reason = {}
    for output, reason in reasons.items():
        by_reason.setdefault(reason, []).append(output)
    return "; ".join(f"{', '.join(outs)} n/a ({reason})" for reason, outs in by_reason.items())


def _cuda_host(robot, constraints, algorithm, gen, precision, layout, folder):
    """(the host build of ``algorithm``'s CUDA form, loaded, with robot and constraints; the
    oracle session of its C function; a note of what was built and checked)."""
    from .codegen.cuda import host_function
    g = api.generate(robot, constraints, algorithm, target="cuda", precision=precision, layout=layout, **gen)
    with step(f"building the host form of {g.manifest_path.with_suffix('.cu').name} (C++ through the shim)"):
        h = host_function(g.manifest_path, Path(folder) / f"{g.manifest_path.stem}-{layout}.so")
        h._entry()              # loaded now: the folder is a temporary one
    h.robot, h.constraints = g.robot, g.constraints
    note = (f"{algorithm}: {g.manifest_path.with_suffix('.cu')} {_cuda_built(g.manifest)}; rows 'C target' and "
            f"the oracles check its host build (C++ through the shim); at build, {_host_check_text(g.manifest)}")
    return h, FunctionSession(robot, g.constraints, g.c_function, note)


def _check_one(robot, constraints, algorithms, oracle_names, samples, tol, out_dir, cflags, cc, cse, force, osim,
               name=None, precision="double", target="c", layout="soa"):
    """Rows of CHECK_HEADERS (one per algorithm and oracle) and whether every one passed; in
    single precision also a row of the function against its double build, within its stored
    bound (api.check_precision), and the oracles' tolerance at least that bound.  ``target``
    "cuda": the host build of each algorithm's CUDA form (``precision``, ``layout``) against
    the C target's function (row 'C target') and the oracles."""
    rows, ok, notes = [], True, {}
    cs, scenario = api.constraint_set(robot, constraints)
    sessions = {}
    for o in oracle_names:
        try:
            sessions[o] = oracles.get_oracle(o).session(robot, cs)
        except DelassusError as exc:         # the oracle's model contradicts ours: every row fails
            sessions[o] = exc
    for a in algorithms:
        t0 = time.perf_counter()
        if a != AUTO and not get_algorithm(a).accepts(cs):     # e.g. `check registry -a all` on Cassie's loops
            rows.append([robot.name, scenario, a, "-", cs.m, None, None, None, None, "n/a: link-to-link or joint rows",
                         "skipped", 0.0])
            continue
        if osim and not gives_osim(a):                         # `check -a all --osim`: the dynamics solvers
            rows.append([robot.name, scenario, a, "-", cs.m, None, None, None, None,
                         "n/a: --osim needs a Delassus output", "skipped", 0.0])
            continue
        gen = dict(out_dir=out_dir, cflags=_cflags(cflags), cc=cc, cse=cse, force=force, osim=osim, name=name)
        checks, label = sessions, a
        with tempfile.TemporaryDirectory() as folder:
            if target == "cuda":
                f, c_target = _cuda_host(robot, constraints, a, gen, precision, layout, folder)
                checks, label = {"C target": c_target, **sessions}, f"{a} (cuda host)"
                notes.setdefault("C target", []).extend(c_target.notes)
            else:
                f = api.generate(robot, constraints, a, precision=precision, **gen)
        if precision == "single" and target == "c":
            rows.append(_precision_row(f, a, t0))
            ok &= rows[-1][10] == "ok"
        for o, session in checks.items():
            head = [robot.name, f.manifest["scenario"], label, o, f.constraints.m, f.manifest["op_count"]["instructions"]]
            if isinstance(session, DelassusError):
                rows.append(head + [None, None, None, f"oracle failed: {session}", "FAIL", 0.0])
                ok = False
                continue
            with step(f"checking {a} for {robot.name}/{f.manifest['scenario']} against {o} over {samples} samples"):
                results = compare(f, robot, f.constraints, samples=samples, tol=api.single_tolerance(f, tol),
                                  oracle=session)
            not_applicable = "; ".join(filter(None, [_not_applicable(results.not_applicable), *(
                f"{k} skipped at {n} of {samples} samples ({why})" for k, (n, why) in results.skipped.items())]))
            if not results:    # the oracle had no answer for any output (e.g. redundant hard constraints)
                rows.append(head + [None, None, None, not_applicable or "n/a", "n/a",
                                    round(time.perf_counter() - t0, 1)])
                continue
            worst = max(results, key=lambda k: results[k].ratio)        # the failing output, or the closest to it
            passed = results.passed
            ok &= passed
            c = results[worst]
            others = ", ".join([f"{k} {v.error:.1e}" for k, v in results.items() if k != worst]
                               + ([not_applicable] if not_applicable else [])) or None
            rows.append(head + [worst, c.error, f"{c.ratio:.2g} (κ {c.kappa:.1e})", others, "ok" if passed else "FAIL",
                                round(time.perf_counter() - t0, 1)])
    return rows, ok, {o: s.notes for o, s in sessions.items() if not isinstance(s, DelassusError)} | notes


def _check_derivatives(robot, constraints, algorithms, derivatives, wrt, method, samples, tol, gen):
    """Rows comparing each derivative with central finite differences of the compiled value
    function on the manifold, and the dot-product test of a JVP/VJP pair; and whether all passed."""
    rows, ok = [], True
    cs, scenario = api.constraint_set(robot, constraints)
    for a in algorithms:
        if a != AUTO and not get_algorithm(a).accepts(cs):
            rows.append([robot.name, scenario, a, None, None, None, None, None, None, "skipped", 0.0])
            continue
        value = api.generate(robot, constraints, a, **gen)
        base = value.op_count["instructions"]
        made = {}
        for d in derivatives:
            t0 = time.perf_counter()
            f = api.generate(robot, constraints, a, derivative=d, wrt=wrt, method=method, **gen)
            made[d] = checkable = Checkable.compiled(f)
            skipped = []
            with step(f"checking the {d} of {a} for {robot.name}/{scenario} against finite differences over {samples} samples"):
                results = compare_derivative(checkable, value, robot, value.constraints, samples, tol=tol, skipped=skipped)
            worst = max(results, key=lambda k: results[k].ratio)
            dot = scaled = None
            if d == "vjp" and "jvp" in made:
                dot, scaled = dot_errors(dot_products(made["jvp"], checkable, robot, value.constraints, samples,
                                                      value=value))
            oracle = _against_pinocchio(f, robot, value.constraints, a, samples) if d == "jacobian" else None
            passed = all(c.passed for c in results.values()) and (dot is None or dot <= DOT_TOL) \
                and not (isinstance(oracle, float) and oracle > PIN_TOL)
            ok &= passed
            rows.append([robot.name, scenario, a, d, ",".join(checkable.record["wrt"]), f.op_count["instructions"],
                         round(f.op_count["instructions"] / base, 2), worst, results[worst].error,
                         None if dot is None else f"{dot:.1e} ({scaled:.1e})", oracle if not isinstance(oracle, float) else f"{oracle:.1e}",
                         ("ok" if passed else "FAIL")
                         + (f" ({len(skipped)} points with conditioning < {PIVOT_MIN:g} redrawn)" if skipped else ""),
                         round(time.perf_counter() - t0, 1)])
    return rows, ok


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


@cli.command(epilog=ROBOT_HELP, help=f"""Compile and compare with the oracles on random configurations.

    ROBOT 'registry' checks every scenario of every available registry robot.

    Oracles (--oracle, repeatable or a comma list): numpy (the NumPy reference, our own parse of
    the model), pinocchio (Pinocchio's own parse of a URDF file or text; for SDF, spatial_v2 and
    synthetic models a Pinocchio model built from our parse, which checks the algorithms but not
    the parse: the output says so), mujoco (MuJoCo's own compile of an MJCF file or text).
    Default: numpy, plus pinocchio for URDF, SDF and spatial_v2 models when the pin package is
    installed, plus mujoco for MJCF models when the mujoco package is.  An output an oracle cannot compare is reported
    n/a with the reason, never as passed.

    Tolerance: {TOLERANCE_RULE}.  The row shows the output closest to failing (the failing one
    if any): its largest relative error, and its largest ratio of error to allowed error
    (above 1 fails) with κ at that sample.

    With --derivative: {FD_RULE}; a VJP checked after a JVP with respect to the same inputs
    also passes the dot-product test ⟨ẏ, ȳ⟩ = ⟨ẋ, x̄⟩ to {DOT_TOL:g} relative (|a − b| / max(|a|, |b|); in
    brackets |a − b| / (‖ẏ‖ ‖ȳ‖), the scale of the products' rounding, large where the test's
    own inner product cancels); a Jacobian of {PIN_RULE}.""")
@_with(_trace_opts)
@_osim_opt
@click.option("--oracle", "oracle_opts", multiple=True, metavar="NAME",
              help=f"{', '.join(oracles.ORACLES)} (repeatable or comma-separated; default: see above)")
@click.option("--samples", default=100, show_default=True, type=click.IntRange(1, CHECK_MAX_SAMPLES),
              help=f"random configurations (1 to {CHECK_MAX_SAMPLES:,})")
@click.option("--tol", default=None, type=float, callback=_positive_tolerance,
              help=f"relative error allowed where κ <= {KAPPA_FREE:g}, scaled by κ/{KAPPA_FREE:g} above (see above; "
                   f"default {DEFAULT_TOL:g}); with --derivative, against finite differences (default {FD_TOL:g})")
@click.option("--all-scenarios", is_flag=True, help="every scenario of the robot")
@_with(_gen_opts)
@_jobs_opt
@_with(_derivative_opts)
@click.option("--precision", type=click.Choice(PRECISIONS), default="double", show_default=True,
              help="single: check the float build, against its double build within its stored error bound and "
                   "against the oracles with at least that tolerance")
@click.option("--target", type=click.Choice(api.TARGETS), default="c", show_default=True,
              help="cuda: check the CUDA form's host build (C++ through the shim, no GPU needed) against the C "
                   "target's function (row 'C target') and the oracles (docs/gpu.md)")
@click.option("--layout", type=click.Choice(["soa", "aos"]), default="soa", show_default=True,
              help="with --target cuda: the kernel's internal layout")
def check(robot, fixed_base, scenario, specs, algorithms, cse, osim, oracle_opts, samples, tol, all_scenarios, out_dir,
          cflags, cc, force, name, jobs, derivatives, wrt, method, precision, target, layout):
    algos, derivatives = _algorithms(algorithms), _derivatives(derivatives, wrt)
    for o in (n.strip() for g in oracle_opts for n in g.split(",") if n.strip()):
        oracles.get_oracle(o)               # an unknown name fails before anything is built
    if name and robot == "registry":
        raise click.UsageError("--name names one model: not with 'check registry'")
    if fixed_base is not None and robot == "registry":
        raise DelassusError("--fixed-base/--floating-base pick one model's base: not with 'check registry'")
    if derivatives and osim:
        raise click.UsageError("--derivative checks derivatives of the algorithms' own outputs: not with --osim")
    if derivatives and precision == "single":
        raise click.UsageError("--derivative checks double builds against finite differences: not with --precision single")
    if derivatives and target == "cuda":
        raise click.UsageError("--derivative checks C builds against finite differences: not with --target cuda")
    if robot == "registry" or all_scenarios:
        targets = [(load_robot(n, floating_base=_floating(fixed_base)), None)
                   for n in (registry.names() if robot == "registry" else [robot])
                   if robot != "registry" or registry.is_available(n)]
        targets = [(r, s) for r, _ in targets for s in r.scenarios]
    else:
        r, cs, _ = _resolve(robot, scenario, specs, fixed_base)
        targets = [(r, cs if specs else (scenario or api.default_constraints(r)))]
    if derivatives:
        rows, ok = [], True
        gen = dict(out_dir=out_dir, cflags=_cflags(cflags), cc=cc, cse=cse, force=force, name=name)
        for r, constraints in targets:
            new_rows, passed = _check_derivatives(r, constraints, algos, derivatives, wrt, method, samples,
                                                  FD_TOL if tol is None else tol, gen)
            rows += new_rows
            ok &= passed
        click.echo(report.table(rows, ["robot", "scenario", "algorithm", "derivative", "wrt", "instructions", "× value",
                                       "worst output", f"max rel. error vs FD ({samples} points)", "dot test (rounding scale)",
                                       "vs Pinocchio", "result", "s"]))
        if not ok:
            sys.exit(1)
        return
    rows, ok, said = [], True, set()
    robots = iter(r for r, _ in targets)

    def report_target(result):
        nonlocal rows, ok
        new_rows, passed, notes = result
        r = next(robots)
        rows += new_rows
        ok &= passed
        for o, lines in notes.items():
            for line in lines:
                if (r.name, o, line) not in said:
                    said.add((r.name, o, line))
                    click.echo(printable(f"  {r.name}: {o}: {line}"), err=True)
        for row in new_rows:
            err = f"{row[9]}" if row[7] is None else \
                f"{row[6]} max rel. error {row[7]:.2e}, worst error/allowed {row[8]}"
            click.echo(printable(f"  {row[0]}/{row[1]} {row[2]} vs {row[3]}: {err} ({row[10]})"), err=True)
    run([Job(f"{r.name}/{c if isinstance(c, str) else 'custom constraints'}", _check_one,
             (r, c, algos, oracles.oracle_names(oracle_opts, r), samples, DEFAULT_TOL if tol is None else tol, out_dir, cflags, cc, cse, force, osim,
              name, precision, target, layout)) for r, c in targets],
        workers=jobs, on_done=in_order(report_target))
    click.echo(report.table(rows, [h if h != "max rel. error" else f"max rel. error ({samples} samples)"
                                   for h in CHECK_HEADERS]))
    if not ok:
        sys.exit(1)


@cli.command(epilog=ROBOT_HELP)
@_with(_target_opts)
@click.option("-a", "--algorithm", default=AUTO, show_default=True, metavar="ALGO",
              help="per mode: 'auto' (the fewest instructions among the Delassus algorithms), a Delassus algorithm, a "
                   "dynamics solver or auto_hard (pv|ltl) / auto_soft (pv_soft|ltl_soft), an operator or auto_apply / "
                   "auto_damped (matrix-free or explicit)")
@click.option("--modes", multiple=True, metavar="all|N-of-k|MODE|FILE",
              help="the contact modes: all (default: every subset), N-of-k (every set of N of the k constraints), one "
                   "mode (a mask such as 0x5, or constraints joined by commas, '-' for none), or a file with one mode "
                   "per line (repeatable)")
@_osim_opt
@_cse_opt
@_with(_gen_opts)
@_jobs_opt
@click.option("--cluster", default=None, metavar="ADDRESS",
              help="build on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); results come back here (a "
                   "peer that does not answer as a Dask scheduler within 10 s is refused)")
@click.option("--package", "package_dir", default=None, metavar="DIR",
              help="also write the library's C package (dispatcher, every mode, Makefile, CMakeLists.txt, example) to DIR")
def library(robot, fixed_base, scenario, specs, algorithm, modes, osim, cse, out_dir, cflags, cc, force, name, jobs, cluster,
            package_dir):
    """One function per contact mode (subset of the constraints, bit i = the i-th given) and a
    dispatcher over the mask of active constraints, built on all cores or a Dask cluster.
    Unchanged modes come from the cache; an interrupted build resumes with the missing ones."""
    from .executor import connect
    from .contact_modes import library as make_library
    robot, cs, _ = _resolve(robot, scenario, specs, fixed_base)
    with connect(cluster) as client:
        lib = make_library(robot, cs if specs else (scenario or api.default_constraints(robot)), algorithm,
                           modes=list(modes) or "all", out_dir=out_dir, cflags=_cflags(cflags), cc=cc, cse=cse,
                           osim=osim, force=force, name=name, jobs=jobs, client=client, package=package_dir)
    m = lib.manifest
    rows = [[md["name"], f"{md['mask']:#x}", ", ".join(md["active"]) or "(none)", md["m"], md["algorithm"] or "-",
             md["instructions"], md.get("so_bytes"), "-" if not md["function"] else "cached" if md["reused"] else "built"]
            for md in m["modes"]]
    click.echo(report.table(rows, ["mode", "mask", "active constraints", "m", "algorithm", "instructions", ".so bytes", ""]))
    b = m["build"]
    click.echo(f"library {m['library']}: {len(rows)} modes ({b['functions']} functions), {b['built']} built"
               + (f" in {b['seconds']:.1f} s on {b['where']}" if b["built"] else "") + f", {b['reused']} from the cache"
               + (f" ({b['kept']} modes kept from the library already there)" if b.get("kept") else ""))
    click.echo(f"-> {lib.manifest_path.with_suffix('.{c,h,json}')}")
    if package_dir:
        click.echo(f"C package -> {package_dir} (make -j, or cmake -S {package_dir} -B build; see its README.md)")


@cli.command()
@_with(_target_opts)
@click.option("-a", "--algorithm", "algorithms", multiple=True, metavar="ALGO",
              help="algorithm(s) to time, 'auto', 'all' (every Delassus algorithm, the default) or "
                   "'dynamics' (every constrained-dynamics solver)")
@click.option("--reps", default=5, show_default=True, help="repetitions (the median is reported)")
@click.option("--calls", default=10_000, show_default=True, help="calls per repetition, cycling over the inputs")
@click.option("--samples", default=64, show_default=True, help="random configurations cycled over")
@click.option("--pinocchio", "pin_method", type=click.Choice(["auto", "cpp", "python", "none"]), default="auto",
              show_default=True, help="Pinocchio timing: C++ against the pin wheel, Python, or auto (C++ if it builds)")
@click.option("--results", "results_dir", default=None, metavar="DIR", help="also write DIR/runtime.md, .csv and a PNG")
@click.option("--batch", "batch_n", type=click.IntRange(min=1), default=None, metavar="N",
              help="instead: configurations per µs of the single call, the batch of N on one and on all cores "
                   "(C and Python), Pinocchio and MuJoCo, against the measured peaks (DIR/batch.md with --results)")
@click.option("--contact", is_flag=True,
              help="instead: issue 25's frictional contact step on ROBOT's problems (go1: go1_stand, go1_slide; talos: "
                   "talos_stand) against Pinocchio's ADMM and PGS routes and MuJoCo (DIR/contact.md with --results)")
@click.option("--gpu", is_flag=True,
              help="instead: the CUDA kernels (FP64/FP32, both layouts) on this machine's GPU, configurations/µs at "
                   "N = 65,536 and 1,048,576 (bench/gpu.py's measurement); exit 2 without CuPy, a CUDA device or nvcc")
@_with(_gen_opts)
def bench(robot, fixed_base, scenario, specs, algorithms, reps, calls, samples, pin_method, results_dir, batch_n, contact,
          gpu, out_dir, cflags, cc, force, name):
    """Time the generated C (a C harness calling the compiled .so) against Pinocchio's
    computeDelassusMatrix (constraintDynamics for the constrained-dynamics solvers, aba for
    aba) on the same inputs; with --batch N the batched evaluation (casadi_delassus/timing/batch_bench.py);
    with --contact the contact step (casadi_delassus/timing/contact_bench.py); with --gpu the CUDA
    kernels on the GPU (casadi_delassus/timing/gpu_bench.py)."""
    from . import timing
    from .registry import delassus_algorithms, dynamics_algorithms
    if contact:
        if specs or scenario or batch_n or algorithms or gpu:
            raise click.UsageError("--contact times issue 25's contact problems: not with -c, --scenario, --batch, --gpu or -a")
        return _bench_contact(robot, reps, calls, results_dir, out_dir)
    robot, cs, _ = _resolve(robot, scenario, specs, fixed_base)
    if gpu:
        if batch_n or len(algorithms) > 1:
            raise click.UsageError("--gpu times one algorithm (-a ALGO, default auto): not with --batch")
        from .timing import gpu_bench
        generate = functools.partial(api.generate, out_dir=out_dir, cflags=_cflags(cflags), cc=cc, force=force, name=name)
        gpu_bench.bench_on_gpu("case", robot, cs if specs else (scenario or api.default_constraints(robot)),
                               (algorithms or [AUTO])[0], generate, reps=reps)
        return
    if batch_n:
        return _bench_batch(robot, cs if specs else (scenario or api.default_constraints(robot)), algorithms, reps,
                            batch_n, results_dir, dict(out_dir=out_dir, cflags=_cflags(cflags), cc=cc, force=force,
                                                       name=name))
    names = list(algorithms) or ["all"]
    names = [n for x in names for n in (delassus_algorithms() if x == "all" else
                                         dynamics_algorithms() if x == "dynamics" else [x])]
    names = _algorithms(names)
    res = timing.benchmark(robot, cs if specs else (scenario or api.default_constraints(robot)), names,
                           calls=calls, reps=reps, samples=samples, cflags=_cflags(cflags), cc=cc, out_dir=out_dir,
                           force=force, pinocchio=pin_method, progress=lambda s: click.echo(s, err=True), name=name)
    click.echo(timing.describe(res))
    click.echo(report.table(timing.result_rows(res), timing.HEADERS))
    for note in res["notes"]:
        click.echo(f"note: {note}")
    if results_dir:
        for p in timing.write_results([res], results_dir):
            click.echo(f"-> {p}")


def _bench_batch(robot, constraints, algorithms, reps, n, results_dir, generate):
    import json
    import os
    import shlex
    from .timing import batch_bench
    if len(algorithms) > 1:
        raise click.UsageError("--batch times one algorithm (-a ALGO, default auto)")
    say = lambda s: click.echo(s, err=True)     # noqa: E731
    cpus = os.sched_getaffinity(0)
    peaks = batch_bench.measure_peaks(max(cpus), say)
    res = batch_bench.run(robot, constraints, (algorithms or [AUTO])[0], reps=reps, n_c=n, n_py=n, all_cpus=cpus,
                          progress=say, generate=generate)
    command = shlex.join(["casadi-delassus", *sys.argv[1:]])
    text = batch_bench.markdown([res], peaks, command, reps)
    click.echo(text)
    if results_dir:
        out = Path(results_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "batch.md").write_text(text)
        (out / "batch.json").write_text(json.dumps(batch_bench.as_json([res], peaks), indent=1))
        click.echo(f"-> {out / 'batch.md'}, batch.json")


def _bench_contact(robot, reps, calls, results_dir, out_dir):
    import os
    import shlex
    from .timing import contact_bench
    problems = contact_bench.problems_of(robot)
    if not problems:
        raise InputError(f"bench --contact: issue 25's contact problems are on go1 and talos, not {robot!r}")
    say = lambda s: click.echo(s, err=True)     # noqa: E731
    times, notes = contact_bench.measure(problems, reps, calls, out_dir, say)
    say("batched throughput")
    rows = contact_bench.batch_rows(problems[0], out_dir, reps, threads=(1, len(os.sched_getaffinity(0))))
    text = contact_bench.markdown(problems, times, notes, shlex.join(["casadi-delassus", *sys.argv[1:]]), reps, rows)
    click.echo(text)
    if results_dir:
        out = Path(results_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "contact.md").write_text(text)
        click.echo(f"-> {out / 'contact.md'}")


@cli.command("step", epilog=ROBOT_HELP)
@_robot_arg
@_base_opt
@click.option("-c", "--contact", "specs", multiple=True, metavar="SPEC", required=True,
              help="a point contact LINK:3d-world[@x,y,z] (repeatable; rows [t1, t2, n] = world x, y, z)")
@click.option("--solver", type=click.Choice(["auto", "admm", "pgs"]), default="admm", show_default=True,
              help="auto: ADMM when a body carries more than two contacts, else PGS (contact/step.py auto_solver)")
@click.option("--relaxed", is_flag=True, help="the convex relaxation (Anitescu) instead of the exact De Saxcé problem")
@click.option("--mu", default=0.8, show_default=True, type=float, help="friction coefficient of every contact")
@click.option("--samples", default=20, show_default=True, type=click.IntRange(1, STEP_MAX_SAMPLES),
              help=f"random states checked against the NumPy reference (1 to {STEP_MAX_SAMPLES:,})")
@click.option("--linear-solve", type=click.Choice(["auto", "dense", "matrix_free"]), default="auto", show_default=True,
              help="ADMM's (G + rho I)^-1: G's dense LDL^T, the staged matrix-free damped inverse, or the fewer "
                   "instructions (contact/step.py step_parts)")
@_with(_gen_opts[:3])
def step_command(robot, fixed_base, specs, solver, relaxed, mu, samples, linear_solve, out_dir, cflags,
                 cc):  # not `step`: progress.step
    """Generate, compile and check the contact step <name>_step (contact/step.py): v_free, the
    Delassus matrix and a frictional-contact ADMM or PGS solve in one C function."""
    from .contact.check import LAMBDA_TOL, check_step
    from .contact.step import DEFAULT_CFLAGS as STEP_CFLAGS, contact_step
    s = contact_step(load_robot(robot, floating_base=_floating(fixed_base)), list(specs), solver=solver, mu=mu,
                     relaxed=relaxed, out_dir=out_dir, cflags=tuple(cflags.split()) if cflags else STEP_CFLAGS, cc=cc,
                     linear_solve=linear_solve)
    m = s.manifest
    click.echo(f"{m['function']}_step: m = {m['m']}, Delassus by {m['delassus']}, linear solve {m['linear_solve']}, {s.solver}"
               f"{' (relaxed)' if relaxed else ''} -> {s.so}")
    with step(f"checking {m['function']}_step against the NumPy reference over {samples} random states"):
        c = check_step(s, samples=samples)
    click.echo(f"check against the NumPy reference, {c.samples} random states: max |Δλ|/max|λ| {c.lam_error:.1e} "
               f"(allowed {LAMBDA_TOL:.0e}), max |Δv_next| {c.velocity_error:.1e} (allowed {c.velocity_tol:.0e}), "
               f"at most {c.iterations} iterations, {c.unconverged} not converged: {'PASS' if c.passed else 'FAIL'}")
    if not c.passed:
        sys.exit(1)


def _numbers(text, what):
    """Comma-separated numbers as a float array (a UsageError names ``what`` otherwise)."""
    try:
        return np.array([float(x) for x in text.split(",")])
    except ValueError:
        raise click.UsageError(f"{what} must be comma-separated numbers, got {text!r}") from None


@cli.command(epilog=ROBOT_HELP)
@_with([_robot_arg, _base_opt])
@click.option("--contact", "contacts", multiple=True, required=True, metavar="LINK[@x,y,z][/r]",
              help="contact candidate: a point on LINK (offset in its frame), a sphere with radius r (repeatable)")
@click.option("-T", "--duration", default=1.0, show_default=True, type=float, help="simulated time (s)")
@click.option("--dt", default=1e-3, show_default=True, type=float, help="time step (s)")
@click.option("--q0", default=None, metavar="x,y,…", help="initial configuration (default: the neutral one)")
@click.option("--drop", default=None, type=float, metavar="H",
              help="move the free base along the normal so that the lowest candidate is H above the ground")
@click.option("--kp", default=0.0, show_default=True, type=float, help="PD stiffness to q0's joint positions")
@click.option("--kd", default=0.0, show_default=True, type=float, help="PD damping")
@click.option("--mu", default=0.8, show_default=True, type=float, help="friction coefficient")
@click.option("--normal", default="0,0,1", show_default=True, metavar="nx,ny,nz", help="ground normal")
@click.option("--height", default=0.0, show_default=True, type=float, help="ground offset along the normal (m)")
@click.option("--solver", type=click.Choice(["auto", "admm", "pgs"]), default="admm", show_default=True,
              help="auto: per active set, ADMM when a body carries more than two contacts, else PGS")
@click.option("--step", "step_kind", type=click.Choice(["compiled", "reference"]), default="compiled", show_default=True,
              help="the compiled contact step, or the NumPy reference step")
@click.option("--baumgarte", default=BAUMGARTE, show_default=True, type=float,
              help="gap stabilisation β in [0, 1]: a penetration closes by β of its depth a step (0: off)")
@click.option("--tol", default=1e-10, show_default=True, type=float, help="solver tolerance (N·s)")
@click.option("--max-iter", default=1000, show_default=True, type=click.IntRange(min=1))
@click.option("-o", "--out", "out_dir", default="simulate_out", show_default=True,
              help="folder for rollout.csv and rollout.png")
@click.option("--out-dir", "build_dir", default=str(api.DEFAULT_OUT), show_default=True,
              help="root of the compiled step and rollout (as generate's -o; cached there)")
def simulate(robot, fixed_base, contacts, duration, dt, q0, drop, kp, kd, mu, normal, height, solver, step_kind,
             baumgarte, tol, max_iter, out_dir, build_dir):
    """Step ROBOT through time on the contact step (PD control to q0) and write its trajectory
    and contact forces (CSV), then a figure; exits 1 when the rollout stopped early, 130 when Ctrl-C
    stopped it (the files hold what was computed), 2 on bad input (nothing written) or when a file
    cannot be written (the CSV is written first, and atomically)."""
    from .simulation import simulate as sim
    from .simulation.rollout_io import plot, write_csv
    robot = load_robot(robot, floating_base=_floating(fixed_base))
    q = robot.neutral_q() if q0 is None else _numbers(q0, "--q0")
    if q.shape != (robot.nq,):
        raise InputError(f"--q0 must have {robot.nq} numbers (nq of {robot.name}), got {q.size}")
    scene = sim.Scene(robot, list(contacts), _numbers(normal, "--normal"), height, mu)
    start = q if drop is None else sim.place(scene, q, drop)
    controller = sim.pd_controller(robot, q, kp, kd) if (kp or kd) else None
    build = {"out_dir": build_dir} if step_kind == "compiled" else {}
    r = sim.run(scene, start, np.zeros(robot.nv), duration, dt, controller,
                sim.factory(step_kind, solver, tol, max_iter, **build), baumgarte)
    h = r.base_height()
    click.echo(f"{len(r.statuses)} steps of {dt:g} s, {r.status}" + (f"; base height {h[-1]:.6f} m" if h is not None else ""))
    csv_path = write_csv(r, f"{out_dir}/rollout.csv")
    try:
        png_path = plot(r, f"{out_dir}/rollout.png")
    except OutputError as exc:
        raise OutputError(f"wrote {csv_path}; {exc}") from None
    click.echo(f"wrote {csv_path} and {png_path}")
    if r.status == sim.INTERRUPTED:
        sys.exit(130)
    if not r.completed:
        sys.exit(1)


@cli.command()
@click.option("-o", "--out", "out_dir", default=str(api.DEFAULT_OUT), show_default=True)
@click.option("--samples", default=100, show_default=True)
def demo(out_dir, samples):
    """Talos (talos_full_v2, nv = 50), both soles welded: generate, compile, check."""
    robot = load_robot("talos")
    click.echo(f"robot: {robot.name} ({robot.source}), nq = {robot.nq}, nv = {robot.nv}, floating base")
    click.echo(f"constraints (scenario 2F): {', '.join(robot.scenarios['2F'])}")
    t0 = time.perf_counter()
    f = api.generate(robot, "2F", AUTO, out_dir=out_dir)
    m = f.manifest
    click.echo(f"algorithm: auto -> {m['auto']['chosen']}, the {m['auto']['reason']}")
    click.echo(f"generated + compiled in {time.perf_counter() - t0:.1f} s ({' '.join(m['cflags'])})")
    ops = m["op_count"]
    click.echo(f"op count ({m['auto']['chosen']}): {ops['instructions']:,} instructions, {ops['flops']:,} flops "
               f"(add {ops['ops']['add']:,}, mul {ops['ops']['mul']:,}, div {ops['ops']['div']:,}), cse = {m['cse']}")
    err = check_delassus(f, robot, f.constraints, samples=samples)
    click.echo(f"max relative error vs NumPy reference over {samples} random q: {err:.2e}")
    if err > DEFAULT_TOL:
        raise DelassusError(f"check failed: {err:.2e} > {DEFAULT_TOL:g}")
    click.echo("files:")
    for ext in ("c", "h", "so", "json"):
        p = f.so_path.with_suffix("." + ext)
        click.echo(f"  {p} ({p.stat().st_size:,} bytes)")
    click.echo("use it from Python:")
    click.echo("  import casadi_delassus as cd, numpy as np")
    click.echo(f"  f = cd.load('{f.manifest_path}')")
    click.echo("  D = f(np.r_[0, 0, 1, 0, 0, 0, 1, np.zeros(44)])   # 12 x 12 Delassus matrix")


class Terminated(BaseException):
    """SIGTERM, raised so that every ``finally`` and cleanup runs as for Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv=None):
    warnings.filterwarnings("ignore", category=DoorWarning)     # the CLI's own calls need no fast door
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:          # not the main thread: leave signals to the caller
        return _main(argv)
    try:
        _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv):
    try:
        cli.main(args=argv, prog_name="casadi-delassus", standalone_mode=False)
    except Terminated:
        click.echo("terminated", err=True)
        sys.exit(128 + signal.SIGTERM)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.UsageError as exc:         # one line, as every other refusal
        where = exc.ctx.command_path if exc.ctx else "casadi-delassus"
        click.echo(f"error: {printable(exc.format_message())} (see {where} --help)", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)
    except DelassusError as exc:
        click.echo(f"error: {printable(exc)}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
