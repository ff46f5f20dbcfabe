"""Our CUDA kernels on a GPU (issue 26), in two halves because the GPU machine has no network
and no CasADi:

    .venv/bin/python bench/gpu.py prepare OUT      # here: .cu files, inputs, CPU reference outputs
    python bench/gpu.py run OUT                    # there: numpy, cupy and nvcc only
    python bench/gpu.py run OUT --host             # anywhere: the shim's host build instead (tests)

``prepare`` writes, per case (go2 four feet 3d-world pv_osimr, talos 2F pv_osim) and precision,
the .cu, its manifest, REF_N random configurations and the C target's (FP64) outputs for them,
and the host shim header.  ``run`` builds each .cu for both layouts (nvcc -O3 -arch=sm_90, or g++
through the shim with --host), checks it against the CPU result on the reference inputs
(max |diff| / max |CPU| per configuration), then times the kernel alone on its internal layout
(inputs tiled to N) with CUDA events, the layouts and precisions interleaved, and prints
configurations/µs (median of REPS, spread min-max), registers and spills, and the fraction of the
GPU's FP64/FP32 FMA peak and memory bandwidth (an instruction counted as one operation).
MJX is not compared yet (docs/gpu.md).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REF_N = 4096
SIZES = (65_536, 1_048_576)
REPS = 7
GO2_FEET = ("FR", "FL", "RR", "RL")


def cases():
    """(name, robot, constraints, algorithm) of the bench."""
    import importlib.util
    import casadi_delassus as cd
    path = Path(importlib.util.find_spec("robosuite_models").origin).parent / "assets/robots/go2/robot.xml"
    go2 = cd.load_robot(str(path))
    return [("go2-4F3w", go2, [f"{leg}_calf@-0.002,0,-0.213:3d-world" for leg in GO2_FEET], "pv_osimr"),
            ("talos-2F", cd.load_robot("talos"), "2F", "pv_osim")]


def prepare(out):
    import casadi_delassus as cd
    from casadi_delassus.codegen import cuda
    out.mkdir(parents=True, exist_ok=True)
    cuda.shim_header(out)
    listed = []
    for name, robot, constraints, algorithm in cases():
        f = cd.generate(robot, constraints, algorithm, out_dir=out / "codegen")
        rng = np.random.default_rng(0)
        Q = np.array([robot.random_q(rng) for _ in range(REF_N)])
        np.savez(out / f"{name}.npz", Q=Q, **f.outputs(Q))
        for precision in cuda.PRECISIONS:
            path = cuda.derive(f.manifest_path, precision, nvcc=None)
            stem = f"{name}-{precision}"
            shutil.copy(path.with_suffix(".cu"), out / f"{stem}.cu")
            shutil.copy(path, out / f"{stem}.json")
            listed.append({"case": name, "precision": precision, "stem": stem, "ref": f"{name}.npz"})
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    print(f"prepared {len(listed)} kernels in {out}: copy the folder to the GPU machine and run bench/gpu.py run there")


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


def timing(kernel, ref, xp, dtype, n, layout):
    """Configurations per µs of the kernel alone on n configurations in its internal layout."""
    m = kernel.manifest
    Q = np.resize(ref["Q"], (n, ref["Q"].shape[1])).astype(dtype)
    Q = xp.asarray(Q if layout == "aos" else np.ascontiguousarray(Q.T))
    outs = [xp.empty(n * int(np.prod(o["shape"])), dtype) for o in m["outputs"]]
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


def run(out, host, sizes, reps):
    xp = np
    if not host:
        import cupy as xp
    listed = json.loads((out / "cases.json").read_text())
    rows, kernels = [], []
    for item in listed:
        m = json.loads((out / f"{item['stem']}.json").read_text())
        ref = dict(np.load(out / item["ref"]))
        dtype = np.float64 if item["precision"] == "double" else np.float32
        for layout in ("soa", "aos"):
            so, regs, spills = build(out, item["stem"], layout, host)
            k = Kernel(so, m)
            kernels.append((item, layout, k, ref, dtype, regs, spills, check(k, ref, xp, dtype)))
    speeds = {}
    for _ in range(reps):                       # interleaved: every kernel once per repetition
        for item, layout, k, ref, dtype, *_ in kernels:
            for n in sizes:
                speeds.setdefault((item["stem"], layout, n), []).append(timing(k, ref, xp, dtype, n, layout))
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
    (out / ("results-host.json" if host else "results.json")).write_text(json.dumps(rows, indent=1))
    if host:
        print("(--host: the shim's build on the CPU; timings are not GPU numbers)")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare").add_argument("out", type=Path)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    r.add_argument("--host", action="store_true", help="the host build through the shim (no GPU, no nvcc)")
    r.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated N")
    r.add_argument("--reps", type=int, default=REPS)
    a = p.parse_args(argv)
    if a.command == "prepare":
        return prepare(a.out)
    return run(a.out, a.host, [int(s) for s in a.sizes.split(",")], a.reps)


if __name__ == "__main__":
    main()
