"""Our CUDA kernels on a GPU (issue 26), in two halves because the GPU machine has no network
and no CasADi:

    .venv/bin/python bench/gpu.py prepare OUT      # here: .cu files, inputs, CPU reference outputs
    python bench/gpu.py run OUT                    # there: numpy, cupy and nvcc only
    python bench/gpu.py run OUT --host             # anywhere: the shim's host build instead (tests)

``prepare`` (casadi_delassus/timing/gpu_bench.py) writes, per case (go2 four feet 3d-world
pv_osimr, talos 2F pv_osim) and precision, the .cu, its manifest, random configurations and the C
target's (FP64) outputs for them, and the host shim header.  ``run`` measures them
(casadi_delassus/timing/gpu_kernels.py, loaded by its path: the package's __init__ needs CasADi),
then MJX.  ``casadi-delassus bench ROBOT --gpu`` runs the same measurement for one robot on a
machine that has both the package and a GPU.
MJX (mujoco-mjx, wheels carried: docs/gpu.md) computes the same J M⁻¹ Jᵀ for go2 as
``jit(vmap)`` of kinematics → com_pos → crb → factor_m → jac → solve_m, from the compiled model
``prepare`` saves (MJB: the same mujoco version must load it), in a subprocess per precision
(JAX's x64 switch is per process); skipped where mujoco.mjx cannot be imported.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_kernels", ROOT / "casadi_delassus" / "timing" / "gpu_kernels.py")
gk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gk)
SIZES, REPS = gk.SIZES, gk.REPS
GO2_FEET = ("FR", "FL", "RR", "RL")
FOOT = "-0.002,0,-0.213"         # the foot sphere's centre in the calf frame (bench/simulate.py)


def go2_path():
    import importlib.util
    return Path(importlib.util.find_spec("robosuite_models").origin).parent / "assets/robots/go2/robot.xml"


def cases():
    """(name, robot, constraints, algorithm) of the bench; talos 2F is the tests' case
    (tests/conftest.py), so the bench and tests/codegen/test_cuda.py build the same function."""
    import casadi_delassus as cd
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import case
    go2 = cd.load_robot(str(go2_path()))
    return [("go2-4F3w", go2, [f"{leg}_calf:3d-world@{FOOT}" for leg in GO2_FEET], "pv_osimr"),
            ("talos-2F", *case("talos-2F"), "pv_osim")]


def prepare(out):
    import casadi_delassus as cd
    from casadi_delassus.timing import gpu_bench
    listed = gpu_bench.prepare(out, cases(), cd.generate)   # the C target in the usual cache (codegen_out)
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


def run(out, host, sizes, reps):
    rows, speeds = gk.measure(out, host, sizes, reps)
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
