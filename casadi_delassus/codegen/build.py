"""trace -> op count -> C -> gcc -> manifest, cached by a hash of every input and
written atomically: files are built in a temporary folder beside the target and moved in
with os.replace, the manifest last, so an interrupted run never leaves a broken .so."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .. import __version__
from ..errors import CompilerError
from .emit import render, work_sizes
from .opcount import count_ops
from ..algorithms import AUTO
from .trace import c_identifier, choose_cheapest, trace

DEFAULT_CFLAGS = ("auto",)
# gcc's register allocation grows faster than linear in the size of one straight-line
# function: on talos 2F naive (84k instructions) -O2 takes 62 s, -O1 41 s, -O0 2.6 s.
# "auto" picks the level from the instruction count (bench/compile_times.py measures it).
AUTO_LEVELS = ((20_000, "-O2"), (35_000, "-O1"), (float("inf"), "-O0"))


def resolve_cflags(cflags, instructions):
    """Replace an "auto" entry by the optimisation level for this function size."""
    level = next(lvl for limit, lvl in AUTO_LEVELS if instructions <= limit)
    return tuple(level if f == "auto" else f for f in cflags)


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
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def q_layout(robot):
    return [{"joint": b.joint.name, "body": b.name, "kind": b.joint.kind, "q_index": b.q_index,
             "nq": b.joint.nq, "v_index": b.v_index, "nv": b.joint.nv} for b in robot.bodies]


def build(robot, constraints, algorithm, out_dir, scenario, cflags=DEFAULT_CFLAGS, cc=None, cse=True,
          force=False, osim=False):
    """Generate and compile; returns the path of the manifest (JSON).  Files are named
    after the algorithm (``<algo>_osim`` when Λ is an output too)."""
    cc = find_compiler(cc)
    out_dir = Path(out_dir)
    stem = f"{algorithm}_osim" if osim else algorithm
    manifest_path = out_dir / f"{stem}.json"
    key = content_hash(robot, constraints, algorithm, cflags, cse, cc, osim)
    if not force and manifest_path.is_file() and (out_dir / f"{stem}.so").is_file():
        try:
            if json.loads(manifest_path.read_text()).get("hash") == key:
                return manifest_path
        except (OSError, ValueError):
            pass
    fname = c_identifier("cd", robot.name, scenario, stem)
    t0 = time.perf_counter()
    auto = None
    if algorithm == AUTO:
        chosen, counts, reason = choose_cheapest(robot, constraints, cse=cse, osim=osim)
        auto = {"chosen": chosen, "instructions": counts, "reason": reason}
    f, inputs, outputs = trace(robot, constraints, auto["chosen"] if auto else algorithm, name=fname, cse=cse, osim=osim)
    t_trace = time.perf_counter() - t0
    counts = count_ops(f)
    cflags = resolve_cflags(cflags, counts["instructions"])
    manifest = {
        "function": fname, "algorithm": algorithm, "osim": osim, "robot": robot.name, "scenario": scenario,
        "source": robot.source, "nq": robot.nq, "nv": robot.nv, "m": constraints.m,
        "q_layout": q_layout(robot), "constraints": constraints.describe(),
        "row_names": constraints.row_names, "inputs": inputs, "outputs": outputs,
        "op_count": counts, "cse": cse, "cflags": list(cflags), "compiler": cc,
        **work_sizes(f), "hash": key, "version": __version__,
    }
    if auto:
        manifest["auto"] = auto
    created = next((d for d in reversed([out_dir, *out_dir.parents]) if not d.exists()), None)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=out_dir))
    try:
        t0 = time.perf_counter()
        for name, text in render(f, manifest, stem).items():
            (tmp / name).write_text(text)
        t_emit = time.perf_counter() - t0
        t_cc, cmd = compile_shared(tmp / f"{stem}.c", tmp / f"{stem}.so", cflags, cc)
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
    return manifest_path
