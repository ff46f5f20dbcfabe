"""The CUDA target, the compile side: ``<stem>-cuda.cu`` (``<stem>-cuda-f32.cu`` in single
precision) from a generated function's C (issue 26), with its manifest ``<stem>-cuda[-f32].json``
and, where nvcc is installed, ``<stem>-cuda[-f32].so`` built by it (runtime/cuda.py loads it).

The .cu is derived from the C target's .c (codegen/build.py), so every family that writes one
(Delassus family, dynamics, operators, stages, derivatives, contact-mode library modes) has a
CUDA form without a second trace, and the C path it is checked against is built anyway.  Its
function body is CasADi's (in codegen/schedule.py's order); each statement is parsed and
rewritten, and anything unknown stops the rewrite naming the line (codegen/statements.py):
- ``arg[i][k]`` / ``res[i][k]`` become strided reads/writes ``CD_AT(x_i, e)`` of the
  configuration's entry e (the row-major position of CasADi's column-major entry k), at stride n
  (entry-major, SoA) or 1 (configuration-major, AoS);
- the sin/cos prologue of codegen/sincos.py becomes one ``sincos`` per joint angle (cd_cuda_sincos);
- in single precision every floating literal gets an ``f`` and every libm call its float form,
  so nothing is promoted to double.
The device function is marked ``__device__``, the kernel (one thread per configuration)
``__launch_bounds__``; the same source compiles as C++ on the host through the shim header
(templates/cuda_host_shim.h.j2), which is how it is tested where there is no GPU.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from ..errors import CompilerError, DelassusError
from ..model.robot import unit_blocks
from ..runtime import artifact
from ..runtime import cuda as rc
from ..verify import precision as vp
from . import precision as fp
from .emit import TEMPLATES
from .escape import Safe, c_comment, c_ident
from .statements import ASSIGN, DECL, INPUT, OUTPUT, fail, function_body, tokens
from .trace_cache import source_hash
from .vectorise import io_layout

LAYOUTS = ("soa", "aos")
THREADS = 128                   # threads per block; the kernel's __launch_bounds__
ARCH = "sm_90"                  # H100/H200
CUDA_STEM = "-cuda"
SINGLE_STEM = "-f32"
KINDS = ("cu",)
# single precision's error: measured over ERROR_SAMPLES random inputs and recorded with the C target's
# keys (verify/precision.record); fresh samples are checked against ERROR_MARGIN times its
# max_rel_error (other samples than those measured may round a little worse; the C target's
# check allows verify/precision.CHECK_FACTOR)
ERROR_SAMPLES = 256
ERROR_MARGIN = 8.0

_ANGLES = re.compile(r"  double cd_angle\[(\d+)\] = \{(.*)\}, cd_sin\[\1\], cd_cos\[\1\];")
_ANGLE = re.compile(r"arg\[(\d+)\]\? arg\[\1\]\[(\d+)\] : 0|0")
_SINCOS_CALL = re.compile(r"  cd_sincos\((\d+), cd_angle, cd_sin, cd_cos\);")
_HOISTED = re.compile(r"  (a\d+)=cd_(sin|cos)\[(\d+)\];")
# CasADi's helpers, defined again as device functions over casadi_real; {m} is the libm suffix
_HELPERS = {
    "casadi_sq": "casadi_real casadi_sq(casadi_real x) { return x*x; }",
    "casadi_sign": "casadi_real casadi_sign(casadi_real x) { return x<0 ? -1 : x>0 ? 1 : x; }",
    "casadi_fabs": "casadi_real casadi_fabs(casadi_real x) { return fabs{m}(x); }",
    "casadi_fmin": "casadi_real casadi_fmin(casadi_real x, casadi_real y) { return fmin{m}(x, y); }",
    "casadi_fmax": "casadi_real casadi_fmax(casadi_real x, casadi_real y) { return fmax{m}(x, y); }",
    "casadi_log1p": "casadi_real casadi_log1p(casadi_real x) { return log1p{m}(x); }",
    "casadi_expm1": "casadi_real casadi_expm1(casadi_real x) { return expm1{m}(x); }",
    "casadi_hypot": "casadi_real casadi_hypot(casadi_real x, casadi_real y) { return hypot{m}(x, y); }",
}
_CONSTANTS = ("casadi_inf", "casadi_nan")


def _fail(lineno, line, why):
    fail(lineno, line, why, "rewrite for CUDA")


def _expression(text, variables, precision, used, lineno, line):
    """``text`` (one expression of CasADi's C) with its names checked and, in single precision,
    float literals and float libm calls; ``used`` collects the CasADi helpers it calls."""
    out, found = [], tokens(text, lineno, line, "rewrite for CUDA")
    for k, m in enumerate(found):
        value = m[m.lastgroup]
        if m.lastgroup == "num" and precision == "single" and re.search(r"[.eE]", value):
            value += "f"
        elif m.lastgroup == "name":
            call = k + 1 < len(found) and found[k + 1][0].strip() == "("
            if call and value in fp.LIBM:     # CUDA has the float forms of all of them too
                value = fp.libm_name(value, precision)
            elif call and value in _HELPERS:
                used.add(value)
            elif call:
                _fail(lineno, line, f"function {value!r} has no CUDA form here")
            elif value not in variables and value not in _CONSTANTS:
                _fail(lineno, line, f"unknown name {value!r}")
        out.append(m[1] + value)
    return "".join(out)


def _entry(layout, i, k, lineno, line):
    """The row-major position within one configuration of CasADi's (column-major) entry k of
    input or output i; ``layout``: io_layout's entries."""
    if i >= len(layout) or k >= layout[i]["size"]:
        _fail(lineno, line, "input or output entry out of range")
    rows, cols = layout[i]["rows"], layout[i]["cols"]
    return (k % rows) * cols + k // rows


def device_body(c_code, inputs, outputs, precision):
    """(the body of the device function: CasADi's statements of the .c's function rewritten,
    the CasADi helpers it calls).  ``inputs``/``outputs``: io_layout of the manifest's."""
    first, body = function_body(c_code)
    variables, used, out, angles = set(), set(), [], 0
    load = "x{0} ? CD_AT(x{0}, {1}) : 0"
    for lineno, line in enumerate(body, first + 1):
        if not line.strip() or line == "  return 0;" or _SINCOS_CALL.fullmatch(line):
            continue        # the sincos call: its angles were read from the cd_angle line before it
        if m := DECL.fullmatch(line):
            names = m[1].split(", ")
            if variables & set(names):
                _fail(lineno, line, "variable declared twice")
            variables.update(names)
            out.append(f"  casadi_real {m[1]};")
        elif m := _ANGLES.fullmatch(line):
            entries = [e.strip() for e in m[2].split(", ")]
            for j, e in enumerate(entries):
                if not (a := _ANGLE.fullmatch(e)):
                    _fail(lineno, line, f"unknown angle {e!r}")
                if a[1] is not None:
                    angles = j + 1
                    value = load.format(int(a[1]), _entry(inputs, int(a[1]), int(a[2]), lineno, line))
                    out.append(f"  casadi_real cd_s{j}, cd_c{j};")
                    out.append(f"  cd_cuda_sincos({value}, &cd_s{j}, &cd_c{j});")
        elif m := _HOISTED.fullmatch(line):
            if m[1] not in variables or int(m[3]) >= angles:
                _fail(lineno, line, "sin/cos of an unknown angle or into an undeclared variable")
            out.append(f"  {m[1]}=cd_{m[2][0]}{m[3]};")
        elif m := INPUT.fullmatch(line):
            if m[1] not in variables:
                _fail(lineno, line, f"input read into undeclared {m[1]!r}")
            out.append(f"  {m[1]}={load.format(int(m[2]), _entry(inputs, int(m[2]), int(m[3]), lineno, line))};")
        elif m := OUTPUT.fullmatch(line):
            i, e = int(m[1]), _entry(outputs, int(m[1]), int(m[2]), lineno, line)
            out.append(f"  if (y{i}) CD_AT(y{i}, {e})={_expression(m[3], variables, precision, used, lineno, line)};")
        elif m := ASSIGN.fullmatch(line):
            if m[1] not in variables:
                _fail(lineno, line, f"assignment to undeclared {m[1]!r}")
            out.append(f"  {m[1]}={_expression(m[2], variables, precision, used, lineno, line)};")
        else:
            _fail(lineno, line, "unknown statement")
    if body and body[-1] != "  return 0;":
        raise CompilerError("cannot rewrite for CUDA: the CasADi function body does not end with 'return 0;'")
    return "\n".join(out), used


def render(manifest, c_code, precision="double", layout="soa", threads=THREADS, c_file=""):
    """The .cu text of the C target's function (``manifest``, ``c_code``: its manifest and .c)."""
    single = precision == "single"
    inputs, outputs = io_layout(manifest["inputs"]), io_layout(manifest["outputs"])
    offset = 0
    for x in (*inputs, *outputs):           # the SoA scratch memory, entries of every array one after the other
        x["offset"], offset = offset, offset + x["size"]
    body, used = device_body(c_code, inputs, outputs, precision)
    fname = c_ident(rc.function_name(manifest["function"], precision))
    real = fp.C_REAL[precision]
    xs, ys = [f"x{x['k']}" for x in inputs], [f"y{y['k']}" for y in outputs]
    params = [f"const casadi_real* {x}" for x in xs] + [f"casadi_real* {y}" for y in ys]
    per = [x["size"] for x in (*inputs, *outputs)]
    ctx = dict(fname=fname, algorithm=c_comment(manifest["algorithm"]), robot=c_comment(manifest["robot"]),
               precision=Safe(precision), version=c_comment(manifest["version"]), c_file=c_comment(c_file),
               single=single, inputs=inputs, outputs=outputs, aos=layout == "aos", threads=threads, real=Safe(real), total=offset,
               helpers=[Safe(_HELPERS[h].replace("{m}", "f" if single else "")) for h in sorted(used)],
               body=Safe(body), params=Safe(", ".join(params)),
               layout_table=Safe(", ".join(map(str, rc.layout_table(manifest["inputs"], manifest["outputs"])))),
               kernel_args=Safe(", ".join(xs + ys)),
               aos_args=Safe(", ".join(f"{p} ? {p} + i * {s} : 0" for p, s in zip(xs + ys, per))),
               soa_args=Safe(", ".join(f"{p} ? {p} + i : 0" for p in xs + ys)),
               scratch_args=Safe(", ".join([f"t{x['k']}" for x in inputs] + [f"u{y['k']}" for y in outputs])))
    return TEMPLATES.get_template("cuda.cu.j2").render(ctx)


def shim_header(folder):
    """Write the host shim header (templates/cuda_host_shim.h.j2) into ``folder``; its path."""
    path = Path(folder) / "cuda_host_shim.h"
    path.write_text(TEMPLATES.get_template("cuda_host_shim.h.j2").render())
    return path


def find_cxx():
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise CompilerError("no C++ compiler found for the CUDA target's host build (looked for $CXX, g++, c++, clang++)")


def _run(cmd, what):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        raise CompilerError(f"cannot run {cmd[0]}: {exc}") from None
    if proc.returncode != 0:
        said = next((l.strip() for l in proc.stderr.splitlines() if "error" in l), proc.stderr.strip()[:300])
        raise CompilerError(f"{what} failed ({Path(cmd[0]).name} exited with status {proc.returncode}): {said[:300]}")
    return proc


def host_library(cu_file, so_file, cflags=("-O2",), cxx=None, defines=()):
    """Compile the .cu as C++ on the host through the shim into the shared library ``so_file``
    (runtime/cuda.py loads it with ``host=True``); ``defines`` e.g. ("CD_CUDA_AOS=1",)."""
    cu_file, so_file = Path(cu_file), Path(so_file)
    shim = shim_header(so_file.parent)
    cmd = [find_cxx() if cxx is None else cxx, *cflags, *(f"-D{d}" for d in defines), "-x", "c++", "-include", str(shim),
           "-fPIC", "-shared", "-o", str(so_file), str(cu_file), "-lm"]
    _run(cmd, f"the host build of {cu_file.name}")
    return so_file


_USAGE = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def device_library(cu_file, so_file, kernel, nvcc="nvcc", arch=ARCH, defines=()):
    """nvcc -O3 -arch ``arch`` -shared: the device library, and what ptxas reports for the kernel
    ({"registers", "spill_stores_bytes", "spill_loads_bytes"}) with the command and its time."""
    cmd = [nvcc, "-O3", f"-arch={arch}", "-Xptxas", "-v", *(f"-D{d}" for d in defines), "-shared", "-Xcompiler", "-fPIC",
           "-o", str(so_file), str(cu_file)]
    t0 = time.perf_counter()
    proc = _run(cmd, f"nvcc on {Path(cu_file).name}")
    report = proc.stderr + proc.stdout
    at = report.find(f"entry function '{kernel}'")
    regs, spills = (_USAGE.search(report, at), _SPILLS.search(report, at)) if at >= 0 else (None, None)
    if not regs or not spills:
        raise CompilerError(f"nvcc on {Path(cu_file).name}: no register/spill report for the kernel in ptxas -v's output")
    return {"command": shlex.join([Path(nvcc).name, *cmd[1:-3], "-o", Path(so_file).name, Path(cu_file).name]),
            "arch": arch, "compile_s": round(time.perf_counter() - t0, 2), "registers": int(regs[1]),
            "spill_stores_bytes": int(spills[1]), "spill_loads_bytes": int(spills[2])}


def find_nvcc(nvcc="auto"):
    """nvcc's path: ``nvcc`` itself, or for "auto" the one on PATH (None where there is none);
    None for None/False."""
    if not nvcc:
        return None
    path = shutil.which("nvcc" if nvcc == "auto" else nvcc)
    if path is None and nvcc != "auto":
        raise CompilerError(f"nvcc {nvcc!r} not found")
    return path


def check_options(precision, layout):
    fp.check(precision)
    if layout not in LAYOUTS:
        raise DelassusError(f"unknown CUDA layout {layout!r}: use one of {', '.join(LAYOUTS)}")


def stem(c_stem, precision):
    return c_stem + CUDA_STEM + (SINGLE_STEM if precision == "single" else "")


def _key(c_manifest, precision, layout, threads, nvcc, arch):
    data = {"c_hash": c_manifest["hash"], "precision": precision, "layout": layout, "threads": threads,
            "source": source_hash(), "nvcc": Path(nvcc).name if nvcc else None, "arch": arch}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def derive(c_manifest_path, precision="double", layout="soa", threads=THREADS, nvcc="auto", arch=ARCH, force=False):
    """Write the CUDA form of the generated function whose C manifest is ``c_manifest_path``
    beside it: ``<stem>-cuda[-f32].cu``, ``.json`` and, where ``nvcc`` (a path, "auto": on PATH,
    None: none) is found, the nvcc-built ``.so`` with the kernel's registers and spills in the
    manifest.  The host build (the shim) is measured against the C path into ``host_check``
    (verify/precision.record's keys), so that a machine without a GPU still says what it checked;
    in single precision that is its error against double, also the ``precision`` record.  Cached by
    a hash of the C function and these options; written atomically.  Returns the manifest's path."""
    check_options(precision, layout)
    c_manifest_path = Path(c_manifest_path)
    c_manifest = artifact.verify(c_manifest_path)
    if c_manifest.get("precision", {}).get("type", "double") != "double":
        raise DelassusError(f"{c_manifest_path.name}: the CUDA form is derived from a double C function (its reference); "
                            f"choose its precision with precision=")
    nvcc = find_nvcc(nvcc)
    kinds = KINDS + (("so",) if nvcc else ())
    name = stem(c_manifest_path.stem, precision)
    folder = c_manifest_path.parent
    key = _key(c_manifest, precision, layout, threads, nvcc, arch)
    if not force and artifact.cached(folder / f"{name}.json", key, kinds, "cuda"):
        return folder / f"{name}.json"
    c_code = c_manifest_path.with_suffix(".c").read_text()
    with artifact.build_folder(folder, name) as tmp:
        t0 = time.perf_counter()
        (tmp / f"{name}.cu").write_text(render(c_manifest, c_code, precision, layout, threads, c_manifest_path.with_suffix(".c").name))
        keep = ("model_name", "algorithm", "osim", "derivative", "stage", "robot", "scenario", "nq", "nv", "m",
                "q_layout", "q_convention", "row_names", "inputs", "outputs", "op_count", "cse")
        manifest = {k: c_manifest[k] for k in keep if k in c_manifest} | {
            "target": "cuda", "precision": {"type": precision}, "real": fp.C_REAL[precision], "layout": layout,
            "layout_note": "user arrays: batch first, row-major per configuration; inside: " +
                           ("entry-major (SoA), transposed on the device" if layout == "soa" else "the same (AoS)"),
            "threads_per_block": threads, **rc.names(c_manifest["function"], precision),
            "c_function": c_manifest["function"], "c_manifest": c_manifest_path.name,
            "c_hash": c_manifest["hash"], "hash": key, "version": c_manifest["version"],
            "timings_s": {"emit": round(time.perf_counter() - t0, 3)}}
        manifest["host_check"] = host_check(tmp / f"{name}.cu", c_manifest_path, c_manifest, precision)
        if precision == "single":
            manifest["precision"] |= manifest["host_check"]
        if nvcc:
            manifest["nvcc"] = device_library(tmp / f"{name}.cu", tmp / f"{name}.so", f"{manifest['function']}_kernel",
                                              nvcc, arch)
        artifact.seal(manifest, tmp, name, kinds, "cuda")
        (tmp / f"{name}.json").write_text(json.dumps(manifest, indent=1))
        return artifact.move_in(tmp, folder, name, kinds)


def host_check(cu_file, c_manifest_path, c_manifest, precision):
    """measure_error's record; in double, where there is no C++ compiler, {"not_run": why}
    instead (the .cu is still written: a GPU machine builds it with nvcc)."""
    if precision == "double":
        try:
            find_cxx()
        except CompilerError as exc:
            return {"not_run": str(exc)}
    return measure_error(cu_file, c_manifest_path, c_manifest, precision)


def host_function(manifest_path, so_file):
    """The CudaFunction of the CUDA manifest ``manifest_path`` run by its host build, compiled
    through the shim with its C function's flags into ``so_file`` (a path of its own: the
    dynamic loader keeps a library by its path)."""
    manifest_path = Path(manifest_path)
    manifest = artifact.verify(manifest_path, KINDS, "cuda")
    c_manifest = artifact.verify(manifest_path.with_name(manifest["c_manifest"]))
    return rc.CudaFunction(manifest_path, host_library=host_library(manifest_path.with_suffix(".cu"), so_file,
                                                                 c_manifest["cflags"]))


def measure_error(cu_file, c_manifest_path, c_manifest, precision="single", samples=ERROR_SAMPLES, seed=0):
    """The host build's error against the FP64 C path over ``samples`` random inputs (built
    through the shim with the C path's flags), per sample the worst over the outputs:
    verify/precision.record's entries."""
    from ..runtime.loader import load
    so = host_library(cu_file, Path(cu_file).with_suffix(".host.so"), c_manifest["cflags"])
    spec = {"precision": {"type": precision}, "inputs": c_manifest["inputs"], "outputs": c_manifest["outputs"],
            **rc.names(c_manifest["function"], precision)}
    values = random_batch(c_manifest, samples, np.random.default_rng(seed))
    named = dict(zip([i["name"] for i in c_manifest["inputs"]][1:], values[1:]))
    got = rc.CudaFunction(spec, host_library=so).outputs(values[0], **named)
    want = load(c_manifest_path).outputs(values[0], **named)
    so.unlink()
    return vp.record(np.max([vp.relative_errors(w, got[name]) for name, w in want.items()], axis=0), seed)


def random_batch(manifest, n, rng):
    """Random inputs of the function of ``manifest`` for n configurations, batch first: q normal
    with its unit blocks (quaternions, (cos, sin) pairs) normalised, weights R in [0.1, 1], the
    rest normal."""
    out = []
    for spec in manifest["inputs"]:
        shape = (n, *spec["shape"])
        a = rng.uniform(0.1, 1.0, shape) if spec["name"] == "R" else rng.normal(size=shape)
        if spec["name"] == "q":
            for _, sl, _ in unit_blocks(manifest.get("q_layout", ())):
                a[:, sl] /= np.linalg.norm(a[:, sl], axis=1, keepdims=True)
        out.append(a)
    return out
