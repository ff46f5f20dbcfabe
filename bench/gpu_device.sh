#!/usr/bin/env bash
# The one script for the GPU machine (no network, no CasADi): run from the repository root after
# `bench/gpu.py prepare gpu_bench` was run here and the folder carried along.  Needs numpy, cupy
# and nvcc there; prints the table of docs/gpu.md and writes gpu_bench/results.json.
set -euo pipefail
DIR=${1:-gpu_bench}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader || true
nvcc --version | tail -1
timeout 280 python3 bench/gpu.py run "$DIR" | tee "${OUT:-.}/gpu_bench.md"
