#!/usr/bin/env bash
# The one script for the GPU machine (no network, no CasADi), run from the repository root:
#   bench/gpu_device.sh gpu_bench [wheels]
# gpu_bench: what `bench/gpu.py prepare gpu_bench` wrote here; wheels (optional): MuJoCo and MJX
# wheels for MJX's row (docs/gpu.md says how to download them).  Needs numpy, cupy and nvcc there
# (and jax with CUDA for MJX); prints the table and writes gpu_bench/results.json (and $OUT/gpu_bench.md).
set -euo pipefail
DIR=${1:-gpu_bench}
WHEELS=${2:-wheels}
if [ -d "$WHEELS" ]; then
  python3 -m pip install --quiet --no-index --no-deps "$WHEELS"/*.whl || echo "(wheels not installed: MJX may be skipped)"
fi
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader || true
nvcc --version | tail -1
timeout 290 python3 bench/gpu.py run "$DIR" | tee "${OUT:-.}/gpu_bench.md"
