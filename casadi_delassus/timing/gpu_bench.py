"""The GPU benchmark of issue 26 on this machine's package: ``prepare`` writes the folder that
timing/gpu_kernels.py measures (here, or carried to a GPU machine without CasADi by
bench/gpu.py), ``bench_on_gpu`` does both for one robot and constraint set
(``casadi-delassus bench ROBOT --gpu``)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..codegen import cuda
from ..codegen.precision import PRECISIONS
from ..errors import DelassusError
from ..runtime.cuda import device_cupy
from . import gpu_kernels

REF_N = 2048            # reference configurations: each kernel is checked on them before it is timed


def prepare(out, cases, generate):
    """Write into ``out``, per case (name, robot, constraints, algorithm) and precision, the .cu of
    the C target's function, its manifest, REF_N random configurations and the C target's (FP64)
    outputs for them, the host shim header and cases.json; ``generate``: api.generate."""
    out.mkdir(parents=True, exist_ok=True)
    cuda.shim_header(out)
    listed = []
    for name, robot, constraints, algorithm in cases:
        f = generate(robot, constraints, algorithm)
        rng = np.random.default_rng(0)
        Q = np.array([robot.random_q(rng) for _ in range(REF_N)])
        np.savez(out / f"{name}.npz", Q=Q, **f.outputs(Q))
        for precision in PRECISIONS:
            path = cuda.derive(f.manifest_path, precision, nvcc=None)
            stem = f"{name}-{precision}"
            shutil.copy(path.with_suffix(".cu"), out / f"{stem}.cu")
            shutil.copy(path, out / f"{stem}.json")
            listed.append({"case": name, "precision": precision, "stem": stem, "ref": f"{name}.npz"})
    (out / "cases.json").write_text(json.dumps(listed, indent=1))
    return listed


def require_gpu():
    """CuPy, a CUDA device and nvcc, or a one-line DelassusError saying which is missing."""
    try:
        device_cupy()
    except DelassusError as exc:
        raise DelassusError(f"bench --gpu: no CUDA device or CuPy found ({exc})") from None
    if cuda.find_nvcc() is None:
        raise DelassusError("bench --gpu: a CUDA device is here but nvcc (the CUDA toolkit) is not on PATH")


def bench_on_gpu(name, robot, constraints, algorithm, generate, sizes=gpu_kernels.SIZES, reps=gpu_kernels.REPS):
    """The kernels of one case timed on this machine's GPU (FP64/FP32, both layouts): gpu_kernels.measure's rows."""
    require_gpu()
    with tempfile.TemporaryDirectory(prefix="cd-gpu-bench-") as tmp:
        prepare(Path(tmp), [(name, robot, constraints, algorithm)], generate)
        return gpu_kernels.measure(Path(tmp), False, sizes, reps)[0]
