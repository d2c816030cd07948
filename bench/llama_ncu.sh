#!/usr/bin/env bash
# llama_geglu's kernels under Nsight Compute, clocks left alone: mlpc's (the gated GEMM kernel and
# the down GEMM) and PyTorch eager's (gate, up, GELU, mul, down), each kernel's time, SM clock and
# tensor-pipe activity, in one call on the GPU machine. What README's "What limits" quotes.
# Usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR
set -euo pipefail
mlpc=${1:?usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR}
out=${2:?usage: bench/llama_ncu.sh MLPC_BINARY OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
# --gated-gemms on and --merge-gemms off: no measured decision, so ncu sees the forward's kernels
# only; --no-gemm-tuning: cuBLASLt's first heuristic choice, as PyTorch takes.
ncu --clock-control none --metrics "$metrics" "$mlpc" run --sample llama_geglu -O2 \
  --gated-gemms on --merge-gemms off --no-gemm-tuning --no-cuda-graph > "$out/ncu_mlpc.txt" 2>&1
ncu --clock-control none --metrics "$metrics" python3 "$here/llama_torch_eager.py" \
  > "$out/ncu_torch.txt" 2>&1
grep -hE "^  [^ ]|gpu__time_duration|tensor_cycles|cycles_elapsed" "$out/ncu_mlpc.txt" "$out/ncu_torch.txt"
