"""trace -> op count -> C -> gcc -> manifest, cached by a hash of every input and
written atomically: files are built in a temporary folder beside the target and moved in
with os.replace, the manifest last, so an interrupted run never leaves a broken .so."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..errors import CompilerError
from .emit import render, work_sizes
from ..opcount import count_ops
from ..registry import AUTO
from .trace import c_identifier, choose_cheapest, trace

DEFAULT_CFLAGS = ("auto",)
# gcc's register allocation grows faster than linear in the size of one straight-line
# function: "auto" picks the level from the instruction count (bench/compile_times.py measures
# it; README "Design choices, measured").  -Og keeps most of -O1's speed at a fraction of its
# compile time on big functions, where -O0 code runs slower than Pinocchio.
AUTO_LEVELS = ((20_000, "-O2"), (40_000, "-O1"), (150_000, "-Og"), (float("inf"), "-O0"))
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


def resolve_cflags(cflags, instructions, cc=None):
    """Replace an "auto" entry by the optimisation level for this function size, the math
    flags of AUTO_MATH and, where ``cc`` accepts it, NATIVE."""
    level = next(lvl for limit, lvl in AUTO_LEVELS if instructions <= limit)
    auto = [level, *AUTO_MATH] + ([NATIVE] if cc and accepts_native(cc) else [])
    out = []
    for f in cflags:
        out += auto if f == "auto" else [f]
    return tuple(out)


@functools.lru_cache(maxsize=None)
def accepts_native(cc):
    """Whether ``cc`` compiles with -march=native here (gcc and clang on x86 and ARM do)."""
    try:
        return subprocess.run([cc, NATIVE, "-x", "c", "-fsyntax-only", os.devnull],
                              capture_output=True).returncode == 0
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def host_cpu():
    """What -march=native compiles for: the CPU model and feature flags (Linux), else the machine."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        return next((line for line in info.splitlines() if line.startswith(("flags", "Features"))), info[:2000])
    except OSError:
        return platform.machine() + platform.processor()


def find_compiler(cc=None):
    cc = cc or os.environ.get("CC")
    if cc:
        path = shutil.which(cc)
        if not path:
            raise CompilerError(f"C compiler {cc!r} (from CC or --cc) not found on PATH")
        return path
    for name in ("gcc", "cc", "clang"):
        if shutil.which(name):
            return shutil.which(name)
    raise CompilerError("no C compiler found (looked for gcc, cc, clang): install gcc or set CC")


def compile_shared(c_file, so_file, cflags, cc):
    cmd = [cc, *cflags, "-fPIC", "-shared", "-o", str(so_file), str(c_file), "-lm"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise CompilerError(f"cannot run C compiler {cc}: {exc}") from None
    if proc.returncode != 0:
        first = next((l for l in proc.stderr.splitlines() if "error" in l), proc.stderr.strip()[:300])
        raise CompilerError(f"compiling {Path(c_file).name} failed: {first}")
    return time.perf_counter() - t0, cmd


def source_hash():
    """Hash of the package's own code and templates: editing an algorithm invalidates the cache."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted([*root.rglob("*.py"), *root.rglob("*.j2")]):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def content_hash(robot, constraints, algorithm, cflags, cse, cc, osim):
    data = {"source": source_hash(), "robot": robot.describe(), "constraints": constraints.describe(), "algorithm": algorithm,
            "cflags": list(cflags), "cse": cse, "osim": osim, "compiler": os.path.basename(cc), "version": __version__}
    if "auto" in cflags or NATIVE in cflags:
        data["host_cpu"] = host_cpu()
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def q_layout(robot):
    return [{"joint": b.joint.name, "body": b.name, "kind": b.joint.kind, "q_index": b.q_index,
             "nq": b.joint.nq, "v_index": b.v_index, "nv": b.joint.nv} for b in robot.bodies]


def is_cached(manifest_path, key):
    """True when ``manifest_path`` and its .so exist and were built for the hash ``key``."""
    manifest_path = Path(manifest_path)
    if not manifest_path.is_file() or not manifest_path.with_suffix(".so").is_file():
        return False
    try:
        return json.loads(manifest_path.read_text()).get("hash") == key
    except (OSError, ValueError):
        return False


def make_manifest(f, robot, constraints, scenario, inputs, outputs, cflags, cc, cse, key, **head):
    """The manifest of the generated function ``f``, led by ``head`` (function, algorithm, ...);
    ``cflags`` are resolved for f's size."""
    counts = count_ops(f)
    return {
        **head, "robot": robot.name, "scenario": scenario,
        "source": robot.source, "nq": robot.nq, "nv": robot.nv, "m": constraints.m,
        "q_layout": q_layout(robot), "constraints": constraints.describe(),
        "row_names": constraints.row_names, "inputs": inputs, "outputs": outputs,
        "op_count": counts, "cse": cse, "cflags": list(resolve_cflags(cflags, counts["instructions"], cc)),
        "compiler": cc, **work_sizes(f), "hash": key, "version": __version__,
    }


def write_compiled(f, manifest, out_dir, stem, t_trace):
    """Emit ``stem``.c/.h, compile ``stem``.so and write ``stem``.json (with the timings,
    compile command and .so size added to ``manifest``), atomically."""
    out_dir = Path(out_dir)
    created = next((d for d in reversed([out_dir, *out_dir.parents]) if not d.exists()), None)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=out_dir))
    try:
        t0 = time.perf_counter()
        for name, text in render(f, manifest, stem).items():
            (tmp / name).write_text(text)
        t_emit = time.perf_counter() - t0
        t_cc, cmd = compile_shared(tmp / f"{stem}.c", tmp / f"{stem}.so", manifest["cflags"], manifest["compiler"])
        manifest["timings_s"] = {"trace": round(t_trace, 3), "emit": round(t_emit, 3), "compile": round(t_cc, 3)}
        manifest["compile_command"] = " ".join(cmd[:-4] + ["-o", f"{stem}.so", f"{stem}.c", "-lm"])
        manifest["so_bytes"] = (tmp / f"{stem}.so").stat().st_size
        (tmp / f"{stem}.json").write_text(json.dumps(manifest, indent=1))
        for ext in ("c", "h", "so", "json"):
            os.replace(tmp / f"{stem}.{ext}", out_dir / f"{stem}.{ext}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if created is not None:  # leave no folder this call made
            shutil.rmtree(created, ignore_errors=True)
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    return out_dir / f"{stem}.json"


def build(robot, constraints, algorithm, out_dir, scenario, cflags=DEFAULT_CFLAGS, cc=None, cse=True,
          force=False, osim=False):
    """Generate and compile; returns the path of the manifest (JSON).  Files are named
    after the algorithm (``<algo>_osim`` when Λ is an output too)."""
    cc = find_compiler(cc)
    out_dir = Path(out_dir)
    stem = f"{algorithm}_osim" if osim else algorithm
    manifest_path = out_dir / f"{stem}.json"
    key = content_hash(robot, constraints, algorithm, cflags, cse, cc, osim)
    if not force and is_cached(manifest_path, key):
        return manifest_path
    fname = c_identifier("cd", robot.name, scenario, stem)
    t0 = time.perf_counter()
    auto = None
    if algorithm == AUTO:
        chosen, counts, reason = choose_cheapest(robot, constraints, cse=cse, osim=osim)
        auto = {"chosen": chosen, "instructions": counts, "reason": reason}
    f, inputs, outputs = trace(robot, constraints, auto["chosen"] if auto else algorithm, name=fname, cse=cse, osim=osim)
    t_trace = time.perf_counter() - t0
    manifest = make_manifest(f, robot, constraints, scenario, inputs, outputs, cflags, cc, cse, key,
                             function=fname, algorithm=algorithm, osim=osim)
    if auto:
        manifest["auto"] = auto
    return write_compiled(f, manifest, out_dir, stem, t_trace)
