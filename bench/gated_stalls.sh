#!/usr/bin/env bash
# Where a sample's gated GEMM kernel loses its tensor-pipe cycles: one launch under Nsight
# Compute with warp-state and source counters (PC sampling), then the per-SASS-instruction page
# as CSV, which bench/stall_ledger.py reads: the hot blocks, the consumers' k-loop split into
# waiting for data, waiting for WGMMAs, issuing them and the rest, and every mbarrier wait with
# its retries (a stage's data, a free stage, the epilogue workers' hand-over). Runs on the GPU
# machine; docs/benchmarks.md's "What limits" quotes it.
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
