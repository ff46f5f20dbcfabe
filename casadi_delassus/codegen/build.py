"""trace -> op count -> C -> gcc -> manifest, cached by a hash of every input and
written atomically: files are built in a temporary folder beside the target and moved in
with os.replace, the manifest last, so an interrupted run never leaves a broken .so.  The
manifest records the files it was written with (runtime/artifact.py): the cache and the
loader take nothing that does not match."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path

from ..version import __version__
from ..registry import AUTO, get_algorithm, is_auto
from ..errors import CompilerError, DelassusError
from ..progress import step
from ..runtime.compiler import find_compiler
from ..runtime import artifact
from . import precision as fp, sincos, vectorise
from .emit import render, work_sizes
from ..opcount import count_ops
from .derivatives import casadi_companions, check_request, input_names, resolve_wrt, trace_derivative
from .trace import cheapest_traced, trace
from .trace_cache import source_hash

DEFAULT_CFLAGS = ("auto",)
# gcc's register allocation grows faster than linear in the size of one straight-line
# function: "auto" picks the level from the instruction count (bench/compile_times.py measures
# it; README "Design choices, measured").  -Og keeps most of -O1's speed at a fraction of its
# compile time on big functions, where -O0 code runs slower than Pinocchio.
AUTO_LEVELS = ((20_000, "-O2"), (40_000, "-O1"), (150_000, "-Og"), (float("inf"), "-O0"))
# Where gcc's time matters more than the code's speed (a test suite: -O0 compiles go1's step 4x
# faster than -O2), this environment variable fixes the level "auto" picks, whatever the size;
# the resolved flags, and so the cache key, carry it.
AUTO_LEVEL_ENV = "CASADI_DELASSUS_AUTO_LEVEL"
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Og", "-Os")
# The batched entry point's vector kernel (codegen/vectorise.py) costs gcc more than the scalar code,
# the more so the longer its values live: gcc took minutes at -Og on the Delassus functions of
# naive talos 2F (83k instructions) and 2F+2H (133k) with it, and reverse-mode derivatives keep
# the whole forward sweep alive (talos 2F aba's VJP, 33k instructions at -O1: 15 s scalar, 84 s
# with the kernel).  Above these sizes "auto" makes the batch a loop over the scalar call
# (README "Batches").
SCALAR_BATCH_ABOVE = {"value": 40_000, "derivative": 20_000}
SCALAR_BATCH = "-DCD_BATCH_LANES=1"
# CasADi stores x·(1/d) as x/d, so a pivot d used by k entries costs k divisions.
# -freciprocal-math lets gcc compute 1/d once and multiply (results differ by rounding only);
# -fno-math-errno drops the errno branches around sqrt.  Neither allows reassociation or
# assumes finite values.  CasADi's helpers (casadi_sq) have external linkage; in a -fPIC .so
# gcc then calls them through the PLT unless -fno-semantic-interposition lets it inline them.
AUTO_MATH = ("-freciprocal-math", "-fno-math-errno", "-fno-semantic-interposition")
# The .so is built for the machine that loads it, as a JIT would: "auto" also targets the host
# CPU where the compiler can (FMA and three-operand AVX, bench/runtime.py).  The C package (--package) keeps portable flags, and the cache key then
# names the host CPU (host_cpu) so a copied cache is never loaded on another one.
NATIVE = "-march=native"
# gcc's priority-coloring register allocator spills less than its default (Chaitin-Briggs) on
# these long straight-line functions: single calls 3-10 % faster (go1 4F3, talos 2F and
# 2F+2H, g1 2F, measured with the sin/cos prologue of codegen/sincos.py).  gcc only: added
# where the compiler takes it, left out of the portable C package.
IRA_PRIORITY = "-fira-algorithm=priority"
COMPILER_SPECIFIC = (NATIVE, IRA_PRIORITY)


# "auto" without NATIVE: code that runs on any CPU of the architecture, e.g. built on a
# cluster's workers for another machine (casadi_delassus/contact_modes/)
AUTO_PORTABLE = "auto-portable"


def resolve_cflags(cflags, instructions, cc=None, kind="value", precision="double", levels=AUTO_LEVELS):
    """Replace an "auto" entry by the optimisation level for this function size, the math
    flags of AUTO_MATH, SCALAR_BATCH above SCALAR_BATCH_ABOVE[kind] instructions and, where
    ``cc`` accepts them, IRA_PRIORITY and NATIVE; "auto-portable" likewise without NATIVE.
    Single ``precision`` adds precision.SINGLE_FLAGS where ``cc`` accepts them, whatever the flags; ``levels``: the
    (instructions, level) table "auto" reads."""
    common = [auto_level(instructions, levels), *AUTO_MATH] + ([SCALAR_BATCH] if instructions > SCALAR_BATCH_ABOVE[kind] else [])
    compiler = [flag for flag in (IRA_PRIORITY, NATIVE) if cc and accepts(cc, flag)]
    out = []
    for f in cflags:
        out += [*common, *compiler] if f == "auto" else [*common, *(c for c in compiler if c != NATIVE)] if f == AUTO_PORTABLE else [f]
    if precision == "single":
        out += [flag for flag in fp.SINGLE_FLAGS if cc and accepts(cc, flag) and flag not in out]
    return tuple(out)


def forced_level():
    """$CASADI_DELASSUS_AUTO_LEVEL, checked ("" where unset)."""
    forced = os.environ.get(AUTO_LEVEL_ENV, "").strip()
    if forced and forced not in OPT_LEVELS:
        raise CompilerError(f"{AUTO_LEVEL_ENV}={forced[:40]!r}: expected one of {', '.join(OPT_LEVELS)}")
    return forced


def auto_level(instructions, levels=AUTO_LEVELS):
    """The -O level "auto" takes: the forced one where set, else the first of ``levels`` whose size limit
    ``instructions`` is within."""
    return forced_level() or next(lvl for limit, lvl in levels if instructions <= limit)


def auto_context():
    """What "auto" flags depend on beyond the code, for cache keys: the host CPU and a forced level."""
    forced = forced_level()
    return host_cpu() + (f"\n{AUTO_LEVEL_ENV}={forced}" if forced else "")


@functools.lru_cache(maxsize=None)
def accepts(cc, flag):
    """Whether ``cc`` compiles with ``flag`` here (-march=native: gcc and clang on x86 and ARM;
    -fira-algorithm=priority: gcc)."""
    try:
        return subprocess.run([*shlex.split(cc), flag, "-Werror", "-x", "c", "-fsyntax-only", os.devnull],
                              capture_output=True).returncode == 0
    except OSError:
        return False


def accepts_native(cc):
    return accepts(cc, NATIVE)


@functools.lru_cache(maxsize=None)
def host_cpu():
    """What -march=native compiles for: the CPU model and feature flags (Linux), else the machine."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        return next((line for line in info.splitlines() if line.startswith(("flags", "Features"))), info[:2000])
    except OSError:
        return platform.machine() + platform.processor()


def _first_line(text):
    """The first line that mentions an error, else the first line, at most 300 characters."""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return next((l for l in lines if "error" in l), lines[0] if lines else "")[:300]


def compile_shared(c_file, so_file, cflags, cc):
    """Compile ``c_file`` into the shared library ``so_file`` with the command line ``cc``
    (find_compiler); CompilerError (one line) when it fails or writes no library."""
    cmd = [*shlex.split(cc), *cflags, "-fPIC", "-shared", "-o", str(so_file), str(c_file), "-lm"]
    return compile_shared_from(cmd, c_file, so_file, cc)


def compile_shared_from(cmd, c_file, so_file, cc):
    """Run the compiler command ``cmd`` that writes ``so_file`` (from ``c_file`` or its objects); (seconds, cmd)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        raise CompilerError(f"cannot run C compiler {cc}: {exc}") from None
    _check_compiled(proc.returncode, proc.stderr, proc.stdout, c_file, cc)
    if not Path(so_file).is_file() or Path(so_file).stat().st_size == 0:
        raise CompilerError(f"compiling {Path(c_file).name} failed: {cc} exited with status 0 but wrote no "
                            f"{Path(so_file).name} (is it a C compiler?)")
    return time.perf_counter() - t0, cmd


def _check_compiled(returncode, stderr, stdout, c_file, cc):
    """CompilerError (one line: the status and the compiler's first error line) when ``returncode`` is not 0."""
    if returncode != 0:
        status = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
        said = _first_line(stderr) or _first_line(stdout)
        raise CompilerError(f"compiling {Path(c_file).name} failed: {cc} {status}" + (f": {said}" if said else " and printed nothing"))


class Units(tuple):
    """Per-unit compile flags of one .c that holds several compilation units, unit i selected by -DCD_UNIT=i+1
    (templates/mujoco_rollout.c.j2: CasADi's straight-line code at the level its size allows, the hand-written
    solver at -O2): gcc's time is the big unit's, the hot loops keep their level."""

    def __str__(self):
        return " | ".join(" ".join(flags) for flags in self)


def compile_units(c_file, so_file, units, cc):
    """Compile each unit of ``c_file`` (Units) to an object beside it, at once (separate gcc processes), and link
    them into ``so_file``; (seconds, link command).  CompilerError (one line) as compile_shared."""
    t0 = time.perf_counter()
    objects = [Path(so_file).with_suffix(f".{i + 1}.o") for i in range(len(units))]
    commands = [[*shlex.split(cc), *flags, f"-DCD_UNIT={i + 1}", "-fPIC", "-c", "-o", str(o), str(c_file)]
                for i, (flags, o) in enumerate(zip(units, objects))]
    try:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
                 for cmd in commands]
    except OSError as exc:
        raise CompilerError(f"cannot run C compiler {cc}: {exc}") from None
    for proc in procs:
        _, err = proc.communicate()
        _check_compiled(proc.returncode, err, "", c_file, cc)
    link = [*shlex.split(cc), *(f for f in units[0] if all(f in u for u in units)), "-fPIC",
            "-shared", "-o", str(so_file), *map(str, objects), "-lm"]
    seconds, cmd = compile_shared_from(link, c_file, so_file, cc)
    return time.perf_counter() - t0, cmd


BUILT_KINDS = artifact.BUILT_KINDS      # the files build_cached keeps and seals


def build_cached(folder, stem, make, cc, key, what, timed=False, measure=None):
    """The manifest path of ``folder/stem``.{c,so,json}, a ``what`` (runtime/artifact.ARTIFACTS) for the cache key
    ``key``: taken as it is when its sealed manifest records ``key`` and its .c and .so are intact (artifact.cached),
    else ``make()`` → (C source, compile flags: a tuple or Units, manifest) is written and compiled in a temporary folder beside them
    (artifact.build_folder), the manifest sealed with ``key`` as its ``hash`` and the files moved in, the manifest
    last (a manifest means a complete build; a damaged or mismatched one is replaced).  ``timed``: gcc's seconds go
    in the manifest as ``compile_s``; ``measure(manifest_path)``, given, is called on the sealed files there and
    returns entries added to the manifest's ``precision`` record before it is sealed again (write_compiled's).  Load
    what it returns with runtime/library.open_sealed."""
    folder = Path(folder)
    manifest_path = folder / f"{stem}.json"
    if artifact.cached(manifest_path, key, BUILT_KINDS, what):
        return manifest_path
    with step(f"tracing and emitting the {what} {stem}"):
        source, cflags, manifest = make()
    with artifact.build_folder(folder, stem) as tmp:
        (tmp / f"{stem}.c").write_text(source)
        flags_text = str(cflags) if isinstance(cflags, Units) else " ".join(cflags)
        with step(f"compiling {stem}.c ({len(source) / 1e6:.1f} MB of C, {flags_text})"):
            if isinstance(cflags, Units):
                seconds, _ = compile_units(tmp / f"{stem}.c", tmp / f"{stem}.so", cflags, cc)
            else:
                seconds, _ = compile_shared(tmp / f"{stem}.c", tmp / f"{stem}.so", list(cflags), cc)
        if timed:
            manifest["compile_s"] = round(seconds, 2)
        manifest["hash"] = key
        artifact.seal(manifest, tmp, stem, BUILT_KINDS, what)
        (tmp / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        if measure is not None:
            with step(f"measuring {stem}'s {manifest['precision']['type']} precision error against double"):
                manifest["precision"] |= measure(tmp / f"{stem}.json")
            artifact.seal(manifest, tmp, stem, BUILT_KINDS, what)
            (tmp / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        return artifact.move_in(tmp, folder, stem, BUILT_KINDS)


def _compiler_key(cc):
    """The compiler's name and arguments, not where it is installed."""
    words = shlex.split(cc)
    return shlex.join([os.path.basename(words[0]), *words[1:]])


def content_hash(robot, constraints, algorithm, cflags, cse, cc, osim, function=None, variant=None, precision="double"):
    """``variant``: what else determines the code (a derivative's mode, inputs and method);
    ``precision`` enters the key where it is not double (double keys are as before)."""
    data = {"source": source_hash(), "robot": robot.describe(), "constraints": constraints.describe(), "algorithm": algorithm,
            "cflags": list(cflags), "cse": cse, "osim": osim, "compiler": _compiler_key(cc), "version": __version__,
            "function": function, "variant": variant}
    if "auto" in cflags or NATIVE in cflags:
        data["host_cpu"] = auto_context()
    if precision != "double":
        data["precision"] = precision
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def make_manifest(f, robot, constraints, scenario, inputs, outputs, cflags, cc, cse, key, companions=(),
                  precision="double", **head):
    """The manifest of the generated function ``f``, led by ``head`` (function, algorithm, ...);
    ``cflags`` are resolved for the size of f and the ``companions`` compiled with it
    (CasADi's derivative functions of f, recorded under ``casadi_derivatives``), and for
    ``precision`` (recorded under ``precision``; single: its measured error is added by
    write_compiled)."""
    counts = count_ops(f)
    extra = [{"function": g.name(), "inputs": list(g.name_in()), "outputs": list(g.name_out()),
              "op_count": count_ops(g)} for g in companions]
    model_file = getattr(robot, "model_file", None)
    total = counts["instructions"] + sum(c["op_count"]["instructions"] for c in extra)
    return {
        **head, "robot": robot.name, "scenario": scenario,
        "source": robot.source, **({"model_file": str(model_file)} if model_file else {}),
        "nq": robot.nq, "nv": robot.nv, "floating_base": robot.floating_base, "base": robot.base_note(),
        "m": constraints.m,
        "q_layout": robot.q_layout(), "q_convention": robot.q_convention, "constraints": constraints.describe(),
        "row_names": constraints.row_names, "inputs": inputs, "outputs": outputs,
        "op_count": counts, **({"casadi_derivatives": extra} if extra else {}),
        "precision": {"type": precision},
        "cse": cse, "cflags": list(resolve_cflags(cflags, total, cc, "derivative" if "derivative" in head else "value",
                                                  precision)),
        "compiler": cc, **work_sizes(f), "hash": key, "version": __version__,
    }


def _size_text(manifest):
    """What a .c holds, for progress lines: the function's instructions, plus those of CasADi's
    derivative functions compiled with it."""
    extra = sum(c["op_count"]["instructions"] for c in manifest.get("casadi_derivatives", []))
    return f"{manifest['op_count']['instructions']:,} instructions" + \
        (f" + {extra:,} in its CasADi derivative functions" if extra else "")


def write_compiled(f, manifest, out_dir, stem, t_trace, companions=(), measure=None):
    """Emit ``stem``.c/.h (with the ``companions`` after f), compile ``stem``.so and write
    ``stem``.json (with the timings, compile command and file records added to ``manifest``),
    atomically: built in this run's own temporary folder (artifact.build_folder), moved in
    with the manifest last.  ``measure(manifest_path)``, given, is called on the sealed files
    there and returns entries added to the manifest's ``precision`` record before it is
    sealed again (single precision: its measured error, verify/precision.py)."""
    out_dir = Path(out_dir)
    size = _size_text(manifest)
    with artifact.build_folder(out_dir, stem) as tmp:
        t0 = time.perf_counter()
        with step(f"writing {stem}.c ({size})"):
            for name, text in render(f, manifest, stem, companions).items():
                (tmp / name).write_text(text)
        t_emit = time.perf_counter() - t0
        with step(f"compiling {stem}.c ({size}, {' '.join(manifest['cflags'])})"):
            t_cc, cmd = compile_shared(tmp / f"{stem}.c", tmp / f"{stem}.so", manifest["cflags"], manifest["compiler"])
        macros = vectorise.macros(tmp / f"{stem}.c", manifest["cflags"], manifest["compiler"])
        manifest["batch"], manifest["sincos"] = vectorise.target(manifest, macros), sincos.target(macros)
        manifest["timings_s"] = {"trace": round(t_trace, 3), "emit": round(t_emit, 3), "compile": round(t_cc, 3)}
        manifest["compile_command"] = shlex.join(cmd[:-4] + ["-o", f"{stem}.so", f"{stem}.c", "-lm"])
        manifest["so_bytes"] = (tmp / f"{stem}.so").stat().st_size
        artifact.seal(manifest, tmp, stem)
        (tmp / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        if measure is not None:
            with step(f"measuring {stem}'s {manifest['precision']['type']} precision error against double"):
                manifest["precision"] |= measure(tmp / f"{stem}.json")
            artifact.seal(manifest, tmp, stem)
            (tmp / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        return artifact.move_in(tmp, out_dir, stem)


def gives_osim(algorithm):
    """Whether ``--osim`` applies: the algorithm outputs Λ⁻¹ (Λ comes from its LDLᵀ) or Λ."""
    return algorithm == AUTO or bool({"delassus", "osim"} & set(get_algorithm(algorithm).outputs))


def check_osim(algorithm, osim):
    if osim and not gives_osim(algorithm):
        raise DelassusError(f"--osim needs a Delassus output (Λ is computed from Λ⁻¹): algorithm {algorithm!r} "
                            f"outputs {', '.join(get_algorithm(algorithm).outputs)}")


def build(robot, constraints, algorithm, out_dir, scenario, cflags=DEFAULT_CFLAGS, cc=None, cse=True,
          force=False, osim=False, model=None, derivative=None, wrt=None, method="auto", casadi_derivatives=False,
          precision="double", measure=None):
    """Generate and compile into ``out_dir``; returns the path of the manifest (JSON).  Files
    are named after the algorithm (artifact.stem: ``<algo>-osim`` when Λ is an output too),
    the C function after ``model`` (artifact.model_name; default: the robot's), the scenario
    and the algorithm.  ``derivative`` ("jvp", "vjp", "jacobian") generates that derivative
    with respect to the inputs ``wrt`` (default all) instead; ``casadi_derivatives`` adds
    CasADi's derivative functions of the function to its .so, for casadi.external
    (``<algo>-casadi``; codegen/derivatives.py).  ``precision="single"`` computes in float
    (codegen/precision.py; files and C name marked ``-single``/``_SINGLE``) and stores the
    error ``measure(f, manifest_path)`` measures against the traced function f in double in the
    manifest (verify/precision.measurer; api.generate passes it)."""
    check_osim(algorithm, osim)
    if fp.check(precision) == "single" and casadi_derivatives:
        raise DelassusError("--casadi-derivatives are for casadi.external, which calls double code: not with single precision")
    if precision == "single" and measure is None:
        raise DelassusError("a single-precision build measures its error against double: pass measure "
                            "(verify/precision.measurer), as api.generate does")
    request = None
    if (derivative is not None) + osim + casadi_derivatives > 1:
        raise DelassusError("--osim, --derivative and --casadi-derivatives do not combine: choose one")
    if derivative is not None:
        check_request(derivative, method)
        names = input_names(robot, constraints, algorithm)
        request = {"mode": derivative, "wrt": list(resolve_wrt(names, wrt)), "inputs": names}
    cc = find_compiler(cc)
    out_dir = Path(out_dir)
    model = model or artifact.model_name(robot)
    stem = artifact.stem(algorithm, osim, derivative=request, casadi=casadi_derivatives, precision=precision)
    manifest_path = out_dir / f"{stem}.json"
    fname = artifact.function_name(model, scenario, algorithm, osim=osim, derivative=request, casadi=casadi_derivatives,
                                   precision=precision)
    variant = request | {"method": method} if request else {"casadi_derivatives": artifact.CASADI_ORDER} if casadi_derivatives else None
    key = content_hash(robot, constraints, algorithm, cflags, cse, cc, osim, fname, variant=variant, precision=precision)
    artifact.clean_stale(out_dir)       # what killed runs left here
    if not force and artifact.cached(manifest_path, key):
        return manifest_path
    t0 = time.perf_counter()
    auto, traced = None, None
    if is_auto(algorithm):          # the winner's trace is reused where it is the function generated
        chosen, counts, reason, traced = cheapest_traced(robot, constraints, cse=cse, osim=osim, family=algorithm,
                                                         name=fname)
        auto = {"chosen": chosen, "instructions": counts, "reason": reason}
    algo = get_algorithm(auto["chosen"] if auto else algorithm)
    head = dict(function=fname, model_name=model, algorithm=algorithm, osim=osim,
                **({"casadi_derivative_order": artifact.CASADI_ORDER} if casadi_derivatives else {}))
    if request:
        f, inputs, outputs, head["derivative"] = trace_derivative(robot, constraints, algo.name, derivative,
                                                                  request["wrt"], name=fname, cse=cse, method=method)
    else:
        f, inputs, outputs = traced or trace(robot, constraints, algo, name=fname, cse=cse, osim=osim)
    companions = casadi_companions(f, cse) if casadi_derivatives else ()
    t_trace = time.perf_counter() - t0
    manifest = make_manifest(f, robot, constraints, scenario, inputs, outputs, cflags, cc, cse, key, companions,
                             precision, **head)
    if auto:
        manifest["auto"] = auto
    return write_compiled(f, manifest, out_dir, stem, t_trace, companions,
                          functools.partial(measure, f) if precision == "single" else None)
