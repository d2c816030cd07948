#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, `mlpc bench -O1 --json` for every sample (the plain
# torch.compile-like level), the PyTorch side-by-side at -O2, and one compile over many batches.
# Usage: bench/final_run.sh OUT_DIR [BIN_DIR]
set -uo pipefail
out=${1:?usage: bench/final_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"
timeout 300 "$bin/mlpc_gpu_tests" > "$out/gpu_tests.log" 2>&1
echo "gpu tests: exit $?"; tail -2 "$out/gpu_tests.log"
for s in linear geglu mlp3; do
  timeout 120 "$bin/mlpc" bench --sample "$s" -O1 --json > "$out/bench_O1_$s.json" 2>> "$out/bench.err"
  echo "bench -O1 $s: exit $?"
done
timeout 120 "$bin/mlpc" bench --sample geglu -O2 --batch 1,16,256,4096,8192 > "$out/geglu_batches.txt" 2>&1
echo "geglu batches: exit $?"
timeout 400 python3 bench/compare.py --mlpc "$bin/mlpc" --opt 2 --out "$out" 2>&1 | grep -v Warn
