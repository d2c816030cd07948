#!/usr/bin/env bash
# Where llama_geglu's gated GEMM kernel loses its tensor-pipe cycles: one launch under Nsight
# Compute with warp-state and source counters (PC sampling), then the per-SASS-instruction page
# as CSV, which bench/stall_ledger.py sums by instruction and by phase of the kernel (producer
# TMA issue, consumer waiting for a stage, WGMMA issue and wait, hand-over to the epilogue
# workers, the workers' combine). Runs on the GPU machine.
# Usage: bench/gated_stalls.sh MLPC_BINARY OUT_DIR [SAMPLE]   (default sample: llama_geglu)
set -euo pipefail
mlpc=${1:?usage: bench/gated_stalls.sh MLPC_BINARY OUT_DIR [SAMPLE]}
out=${2:?usage: bench/gated_stalls.sh MLPC_BINARY OUT_DIR [SAMPLE]}
sample=${3:-llama_geglu}
mkdir -p "$out"
ncu --clock-control none --kernel-name regex:mlpc_fused --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --section ComputeWorkloadAnalysis --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
  --import-source no -f -o "$out/gated" \
  "$mlpc" run --sample "$sample" -O2 --gated-gemms on --merge-gemms off --no-cuda-graph \
  > "$out/ncu_run.txt" 2>&1
ncu --import "$out/gated.ncu-rep" --page details --csv > "$out/details.csv"
ncu --import "$out/gated.ncu-rep" --page source --csv --print-source sass > "$out/sass.csv"
python3 "$(dirname "${BASH_SOURCE[0]}")/stall_ledger.py" "$out/sass.csv" | tee "$out/ledger.txt"
