"""The CUDA target's host build (the .cu through the shim, codegen/cuda.py) against the C path, per
function family, on the robots of tests/test_cuda.py -- the numbers behind docs/gpu.md:

    .venv/bin/python bench/cuda_host_accuracy.py

FP64: max |CUDA − C| / max |C| per configuration against the C batch or single call (whichever is
closer; q as the C path reads it), the largest over 40 configurations; FP32: the same against the
FP64 C batch, beside the error and bound its manifest stores.  Uses tests/test_cuda.py's helpers."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import casadi_delassus as cd  # noqa: E402
from casadi_delassus.codegen import cuda  # noqa: E402
from conftest import case  # noqa: E402
import test_cuda as t  # noqa: E402

GO1 = [("pv_osim", {}), ("pv_osimr", {"osim": True}), ("aba", {}), ("pv", {}), ("delassus_apply", {}),
       ("damped_inverse_apply", {}), ("pv_osim", {"derivative": "jvp"}), ("aba", {"derivative": "jacobian", "wrt": ["q"]})]
OTHERS = [("ladder", "pv_osim"), ("cassie-loops", "auto"), ("talos-2F", "pv_osim")]


def main():
    out, tmp = ROOT / "codegen_out", Path(tempfile.mkdtemp())
    print("| case | function | FP64 error | FP32 error | FP32 stored max | FP32 bound |\n|---|---|---|---|---|---|")
    todo = [("go1-4F3", a, kw) for a, kw in GO1] + [(name, a, {}) for name, a in OTHERS]
    for name, algorithm, kw in todo:
        robot, cs = case(name)
        f = cd.generate(robot, cs, algorithm, out_dir=out, **kw)
        values = t.inputs(f, robot, 40, 3)
        fp64 = max(t.fp64_errors(t.host(f, tmp), f, values).values())
        single = t.host(f, tmp, "single")
        fp32, stored = max(cuda.relative_errors(single, f, values).values()), single.manifest["fp32_error"]
        print(f"| {name} | {f.manifest['function']} | {fp64:.1e} | {fp32:.1e} | {stored['max_relative']:.1e} | "
              f"{stored['bound']:.1e} |")


if __name__ == "__main__":
    main()
