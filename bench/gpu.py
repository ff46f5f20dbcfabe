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
MJX (mujoco-mjx, wheels carried: docs/gpu.md) computes the same J M⁻¹ Jᵀ for go2 as
``jit(vmap)`` of kinematics → com_pos → crb → factor_m → jac → solve_m, from the compiled model
``prepare`` saves (MJB: the same mujoco version must load it), in a subprocess per precision
(JAX's x64 switch is per process); skipped where mujoco.mjx cannot be imported.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REF_N = 2048
SIZES = (65_536, 1_048_576)
REPS = 7
GO2_FEET = ("FR", "FL", "RR", "RL")
FOOT = "-0.002,0,-0.213"         # the foot sphere's centre in the calf frame (bench/simulate.py)


def go2_path():
    import importlib.util
    return Path(importlib.util.find_spec("robosuite_models").origin).parent / "assets/robots/go2/robot.xml"


def cases():
    """(name, robot, constraints, algorithm) of the bench."""
    import casadi_delassus as cd
    go2 = cd.load_robot(str(go2_path()))
    return [("go2-4F3w", go2, [f"{leg}_calf:3d-world@{FOOT}" for leg in GO2_FEET], "pv_osimr"),
            ("talos-2F", cd.load_robot("talos"), "2F", "pv_osim")]


def prepare(out):
    import casadi_delassus as cd
    from casadi_delassus.codegen import cuda
    out.mkdir(parents=True, exist_ok=True)
    cuda.shim_header(out)
    listed = []
    for name, robot, constraints, algorithm in cases():
        f = cd.generate(robot, constraints, algorithm)       # the C target, in the usual cache (codegen_out)
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
    save_mjx_model(out)
    print(f"prepared {len(listed)} kernels in {out}: copy the folder to the GPU machine and run bench/gpu.py run there")


def save_mjx_model(out):
    """go2's compiled MuJoCo model (MJB, without its visual meshes, collisions off; the bodies'
    inertias are explicit in the file) and its feet (body id, offset) for the MJX comparison."""
    import mujoco
    spec = mujoco.MjSpec.from_file(str(go2_path()))
    for g in [g for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH]:     # visuals: 40 MB of meshes
        spec.delete(g)
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    m = spec.compile()
    m.geom_contype[:], m.geom_conaffinity[:] = 0, 0         # no collisions: MJX lacks some pairs, J M⁻¹ Jᵀ needs none
    mujoco.mj_saveModel(m, str(out / "go2.mjb"), None)
    feet = [[m.body(f"{leg}_calf").id, [float(x) for x in FOOT.split(",")]] for leg in GO2_FEET]
    (out / "mjx.json").write_text(json.dumps({"case": "go2-4F3w", "mujoco": mujoco.__version__, "feet": feet}))


def mjx(out, precision, sizes, reps):
    """MJX's configurations/µs at each size and its error against the CPU reference: one JSON line."""
    import importlib
    import jax
    jax.config.update("jax_enable_x64", precision == "double")
    import jax.numpy as jnp
    import mujoco
    from mujoco import mjx as mx_
    spec = json.loads((out / "mjx.json").read_text())
    if spec["mujoco"] != mujoco.__version__:
        sys.exit(f"go2.mjb was saved by mujoco {spec['mujoco']}, this is {mujoco.__version__}: carry that version")
    solve_m = getattr(mx_, "solve_m", None) or importlib.import_module("mujoco.mjx._src.smooth").solve_m
    model = mx_.put_model(mujoco.MjModel.from_binary_path(str(out / "go2.mjb")))
    dtype = jnp.float64 if precision == "double" else jnp.float32

    def delassus(q):
        d = mx_.make_data(model).replace(qpos=q)
        for stage in (mx_.kinematics, mx_.com_pos, mx_.crb, mx_.factor_m):
            d = stage(model, d)
        rows = [mx_.jac(model, d, d.xpos[b] + d.xmat[b] @ jnp.asarray(p, dtype), b)[0].T for b, p in spec["feet"]]
        J = jnp.concatenate(rows)
        return J @ jax.vmap(lambda r: solve_m(model, d, r))(J).T

    f = jax.jit(jax.vmap(delassus))
    ref = np.load(out / f"{spec['case']}.npz")
    got = np.asarray(f(jnp.asarray(ref["Q"], dtype)), float).reshape(len(ref["Q"]), -1)
    want = ref["delassus"].reshape(got.shape)
    error = float((np.abs(got - want).max(1) / np.abs(want).max(1)).max())
    speeds = {}
    for n in sizes:
        try:
            Q = jnp.asarray(np.resize(ref["Q"], (n, ref["Q"].shape[1])), dtype)
            f(Q).block_until_ready()                        # compiled for this n
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                f(Q).block_until_ready()
                times.append(time.perf_counter() - t0)
            speeds[n] = [n / (t * 1e6) for t in times]
        except Exception as exc:                            # e.g. out of device memory at a million
            speeds[n] = f"failed: {str(exc).splitlines()[0][:200]}"
    print(json.dumps({"precision": precision, "error": error, "speeds": speeds, "device": str(jax.devices()[0])}))


def run_mjx(out, sizes, reps):
    """MJX's rows per precision (subprocesses), or [] where mujoco.mjx is not installed."""
    import importlib.util
    if not (out / "mjx.json").exists() or importlib.util.find_spec("mujoco") is None or \
            importlib.util.find_spec("mujoco.mjx") is None:
        print("(MJX: mujoco.mjx not installed here, not compared)")
        return []
    rows = []
    for precision in ("double", "single"):
        proc = subprocess.run([sys.executable, __file__, "mjx", str(out), "--precision", precision,
                               "--sizes", ",".join(map(str, sizes)), "--reps", str(reps)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"(MJX {precision} failed: {proc.stderr.strip().splitlines()[-1][:300] if proc.stderr.strip() else proc.returncode})")
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


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


def run(out, host, sizes, reps):
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
    mjx_rows = run_mjx(out, sizes, reps)
    if mjx_rows:
        print("\n| go2-4F3w: MJX | precision | N | MJX configs/µs (median, min-max) | ours SoA | ours / MJX | "
              "MJX max rel. error vs CPU |\n|---|---|---|---|---|---|---|")
    for r in mjx_rows:
        for n, s in r["speeds"].items():
            ours = speeds.get((f"go2-4F3w-{r['precision']}", "soa", int(n)))
            ours = float(np.median(ours)) if ours else None
            if isinstance(s, str):
                cells = [s, f"{ours:,.1f}" if ours else "-", "-"]
            else:
                med = float(np.median(s))
                cells = [f"{med:,.2f} ({min(s):,.2f}-{max(s):,.2f})", f"{ours:,.1f}" if ours else "-",
                         f"{ours / med:,.0f}x" if ours else "-"]
            print(f"| {r['device']} | {r['precision']} | {int(n):,} | {' | '.join(cells)} | {r['error']:.1e} |")
            rows.append({"case": "go2-4F3w", "mjx": True, "precision": r["precision"], "n": int(n), "configs_per_us": s,
                         "error": r["error"], "device": r["device"]})
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
    x = sub.add_parser("mjx", help="(run's subprocess) MJX alone in one precision")
    x.add_argument("out", type=Path)
    x.add_argument("--precision", choices=("double", "single"), required=True)
    x.add_argument("--sizes", default=",".join(map(str, SIZES)))
    x.add_argument("--reps", type=int, default=REPS)
    a = p.parse_args(argv)
    if a.command == "prepare":
        return prepare(a.out)
    if a.command == "mjx":
        return mjx(a.out, a.precision, [int(s) for s in a.sizes.split(",")], a.reps)
    return run(a.out, a.host, [int(s) for s in a.sizes.split(",")], a.reps)


if __name__ == "__main__":
    main()
