#!/usr/bin/env bash
# llama_geglu's kernels under Nsight Compute, clocks left alone: mlpc's (the gated GEMM kernel and
# the down GEMM), PyTorch eager's (gate, up, GELU, mul, down) and torch.compile's (gate, up, the
# fused gelu*mul, down), each kernel's time, SM clock and tensor-pipe activity, in one call on the
# GPU machine; then bench/ncu_floor.py: mlpc's ratio to each PyTorch forward, kernel by kernel, and
# its floor with mlpc's GEMMs at 100% tensor-pipe activity. What docs/benchmarks.md's "What
# limits" quotes.
# Usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR
set -euo pipefail
mlpc=${1:?usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR}
out=${2:?usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
ncu_csv() { ncu --clock-control none --metrics "$metrics" --csv --log-file "$@"; }
# --gated-gemms on and --merge-gemms off: no measured decision, so ncu sees the forward's kernels
# only (named: no weight or input initialisation); --no-gemm-tuning: cuBLASLt's first heuristic
# choice, as PyTorch takes.
ncu_csv "$out/ncu_mlpc.csv" --kernel-name 'regex:mlpc_fused|nvjet|gemm|cutlass|xmma' \
  "$mlpc" run --sample llama_geglu -O2 --gated-gemms on --merge-gemms off --no-gemm-tuning \
  --no-cuda-graph > "$out/mlpc_run.txt" 2>&1
for mode in eager compile; do  # one forward each, inside cudaProfilerStart/Stop
  TORCHINDUCTOR_COMPILE_THREADS=1 ncu_csv "$out/ncu_torch_$mode.csv" --profile-from-start off \
    python3 "$here/llama_torch_forward.py" "$mode" > "$out/torch_$mode.txt" 2>&1
done
python3 "$here/ncu_floor.py" mlpc="$out/ncu_mlpc.csv" "torch eager=$out/ncu_torch_eager.csv" \
  "torch.compile=$out/ncu_torch_compile.csv" | tee "$out/floor.txt"
