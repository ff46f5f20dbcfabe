"""Our CUDA kernels timed on a GPU (issue 26): the half of the GPU benchmark that runs where the
kernels run.  It imports nothing but the standard library and NumPy (CuPy on the GPU), so
bench/gpu.py loads it by its path on a GPU machine without CasADi; timing/gpu_bench.py prepares
its folder (the .cu files, their manifests, the host shim, reference inputs and the C target's
outputs) and ``casadi-delassus bench ROBOT --gpu`` runs both on one machine.

``measure`` builds each .cu for both layouts (nvcc -O3 -arch=sm_90, or g++ through the shim with
``host``), checks it against the CPU result on the reference inputs (max |diff| / max |CPU| per
configuration: verify/precision.relative_errors, restated here because this module runs without
the package), then times the kernel alone on its internal layout (inputs tiled to N) with CUDA
events, the layouts and precisions interleaved, and prints configurations/µs (median of REPS,
spread min-max), registers and spills, and the fraction of the GPU's FP64/FP32 FMA peak and
memory bandwidth (an instruction counted as one operation)."""
from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

SIZES = (65_536, 1_048_576)
REPS = 7


def build(out, stem, layout, host):
    so = out / f"{stem}-{layout}.so"
    define = f"-DCD_CUDA_AOS={int(layout == 'aos')}"
    if host:
        cmd = ["g++", "-O2", define, "-x", "c++", "-include", str(out / "cuda_host_shim.h"), "-fPIC", "-shared",
               "-o", str(so), str(out / f"{stem}.cu"), "-lm"]
    else:
        cmd = ["nvcc", "-O3", "-arch=sm_90", "-Xptxas", "-v", define, "-shared", "-Xcompiler", "-fPIC", "-o", str(so),
               str(out / f"{stem}.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} … failed: {proc.stderr.strip()[:300]}")
    report = proc.stderr[proc.stderr.find("_kernel'"):]
    regs, spills = re.search(r"Used (\d+) registers", report), re.search(r"(\d+) bytes spill stores", report)
    return so, (int(regs[1]) if regs else None), (int(spills[1]) if spills else None)


class Kernel:
    """One built .so: ``call`` (user layout) and ``raw`` (internal layout) over numpy (host) or cupy arrays."""

    def __init__(self, so, manifest):
        lib = ctypes.CDLL(str(so))
        self.manifest, self.lib = manifest, lib
        n_args = len(manifest["inputs"]) + len(manifest["outputs"]) + 1
        for entry in ("entry", "raw_entry"):
            fn = getattr(lib, manifest[entry])
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_longlong] + [ctypes.c_void_p] * n_args
        self.call, self.raw = getattr(lib, manifest["entry"]), getattr(lib, manifest["raw_entry"])


def _ptr(a):
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def check(kernel, ref, xp, dtype):
    m = kernel.manifest
    Q = xp.asarray(ref["Q"], dtype=dtype)
    outs = [xp.empty((len(Q), *o["shape"]), dtype) for o in m["outputs"]]
    stream = None if xp is np else xp.cuda.get_current_stream().ptr
    assert kernel.call(len(Q), _ptr(Q), *map(_ptr, outs), stream) == 0
    worst = 0.0
    for o, got in zip(m["outputs"], outs):
        want = ref[o["name"]].reshape(len(Q), -1)
        got = (got if xp is np else got.get()).astype(float).reshape(want.shape)
        worst = max(worst, float((np.abs(got - want).max(1) / np.abs(want).max(1)).max()))
    return worst


def buffers(kernel, ref, xp, dtype, n, layout):
    """(inputs, outputs) for n configurations in the kernel's internal layout: the reference tiled."""
    Q = np.resize(ref["Q"], (n, ref["Q"].shape[1])).astype(dtype)
    Q = xp.asarray(Q if layout == "aos" else np.ascontiguousarray(Q.T))
    return Q, [xp.empty(n * int(np.prod(o["shape"])), dtype) for o in kernel.manifest["outputs"]]


def timing(kernel, xp, n, Q, outs):
    """Configurations per µs of the kernel alone on n configurations (``buffers``)."""
    if xp is np:
        t0 = time.perf_counter()
        kernel.raw(n, _ptr(Q), *map(_ptr, outs), None)
        return n / ((time.perf_counter() - t0) * 1e6)
    stream = xp.cuda.get_current_stream()
    start, stop = xp.cuda.Event(), xp.cuda.Event()
    start.record(stream)
    assert kernel.raw(n, _ptr(Q), *map(_ptr, outs), stream.ptr) == 0
    stop.record(stream)
    stop.synchronize()
    return n / (xp.cuda.get_elapsed_time(start, stop) * 1e3)


def peaks(xp):
    """(FP64 and FP32 FMA operations per µs, bytes per µs) of device 0, Hopper's units per SM assumed."""
    if xp is np:
        return None
    p = xp.cuda.runtime.getDeviceProperties(0)
    clock = p["clockRate"] * 1e3
    ops = p["multiProcessorCount"] * clock * 1e-6
    return {"double": ops * 64, "single": ops * 128}, p["memoryClockRate"] * 1e3 * 2 * p["memoryBusWidth"] / 8 * 1e-6


def measure(out, host=False, sizes=SIZES, reps=REPS):
    """Build, check and time every kernel ``prepare`` listed in ``out`` (timing/gpu_bench.py), print
    the table; (rows, {(stem, layout, n): configurations/µs per repetition})."""
    xp = np
    if not host:
        import cupy as xp
    listed = json.loads((out / "cases.json").read_text())
    rows, kernels = [], []
    jobs = [(item, layout) for item in listed for layout in ("soa", "aos")]
    with ThreadPoolExecutor() as pool:           # nvcc takes seconds per kernel: all at once
        built = list(pool.map(lambda job: build(out, job[0]["stem"], job[1], host), jobs))
    for (item, layout), (so, regs, spills) in zip(jobs, built):
        m = json.loads((out / f"{item['stem']}.json").read_text())
        ref = dict(np.load(out / item["ref"]))
        dtype = np.float64 if item["precision"] == "double" else np.float32
        k = Kernel(so, m)
        kernels.append((item, layout, k, ref, dtype, regs, spills, check(k, ref, xp, dtype)))
    speeds = {}
    for n in sizes:                             # the buffers of one size at a time
        data = {(item["stem"], layout): buffers(k, ref, xp, dtype, n, layout) for item, layout, k, ref, dtype, *_ in kernels}
        for rep in range(reps + 1):             # interleaved: every kernel once per repetition; the first is a warm-up
            for item, layout, k, *_ in kernels:
                speed = timing(k, xp, n, *data[(item["stem"], layout)])
                if rep:
                    speeds.setdefault((item["stem"], layout, n), []).append(speed)
        del data
    peak = peaks(xp)
    print("| case | precision | layout | N | configs/µs (median, min-max) | max rel. error vs CPU | registers | "
          "spill stores B | instr. | % FMA peak | % bandwidth |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for item, layout, k, ref, dtype, regs, spills, error in kernels:
        m = k.manifest
        io = sum(int(np.prod(x["shape"])) for x in (*m["inputs"], *m["outputs"])) * np.dtype(dtype).itemsize
        for n in sizes:
            s = speeds[(item["stem"], layout, n)]
            med = float(np.median(s))
            instr = m["op_count"]["instructions"]
            frac = (f"{100 * med * instr / peak[0][item['precision']]:.1f} | {100 * med * io / peak[1]:.1f}"
                    if peak else "- | -")
            print(f"| {item['case']} | {item['precision']} | {layout} | {n:,} | {med:,.1f} ({min(s):,.1f}-{max(s):,.1f}) | "
                  f"{error:.1e} | {regs} | {spills} | {instr:,} | {frac} |")
            rows.append({"case": item["case"], "precision": item["precision"], "layout": layout, "n": n,
                         "configs_per_us": s, "error": error, "registers": regs, "spill_stores": spills})
    return rows, speeds
