#!/usr/bin/env bash
# One device call for whole MLPs in one kernel: the fused-MLP GPU tests, racecheck and memcheck
# on -O2 runs that take a fused.mlp region (f16, bf16 and f32), each narrow sample's bench with
# --explain (the region's record, bytes and FLOPs against the peaks), the kernel probes, and the
# PyTorch harness on the narrow samples. Writes logs under OUT.
# Usage: bench/fused_mlp_gpu_run.sh OUT [PARTS] [BIN]   PARTS: comma list of
#        tests,sanitize,bench,probe,compare, run in that list's order (default: all); BIN:
#        stage/bin
set -uo pipefail
out=${1:?usage: bench/fused_mlp_gpu_run.sh OUT [PARTS] [BIN]}
parts=${2:-tests,sanitize,bench,probe,compare}
bin=${3:-stage/bin}
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } 2>&1 | tee "$out/machine.txt"
export MLPC_CACHE_DIR=/tmp/mlpc-fused-cache
narrow="tcnn_w64 tcnn_w128 tcnn_w32 narrow_gelu"
# The narrow samples are files (samples/NAME.mlp); mlp3_small is built in.
sample_arg() { [[ -f samples/$1.mlp && $1 != mlp3_small ]] && echo "samples/$1.mlp" || echo "--sample=$1"; }
part_tests() {
  timeout 300 "$bin/mlpc_gpu_tests" "[fused_mlp]" --durations yes > "$out/gpu_fused_mlp.log" 2>&1
  echo "fused_mlp GPU tests: exit $?"; tail -n 3 "$out/gpu_fused_mlp.log"
}
part_sanitize() {
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck memcheck; do
    for run in "tcnn_w64 1000" "mlp3_small 64"; do
      set -- $run
      timeout 120 "$cs" --tool "$tool" --error-exitcode 3 "$bin/mlpc" run "$(sample_arg "$1")" \
        --batch "$2" -O2 --fused-mlp on > "$out/$tool.$1.log" 2>&1
      echo "$tool $1 (batch $2): exit $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.$1.log" | tail -n 1)"
    done
  done | tee "$out/sanitize.txt"
}
part_bench() {
  for s in $narrow; do
    timeout 120 "$bin/mlpc" bench samples/$s.mlp --batch 262144 -O2 --explain > "$out/bench_$s.txt" 2>&1
    echo "bench $s: exit $?"
  done
  timeout 120 "$bin/mlpc" bench --sample mlp3_small --batch 64 -O2 --explain > "$out/bench_mlp3_small.txt" 2>&1
  echo "bench mlp3_small: exit $?"
}
part_probe() {
  timeout 120 "$bin/fused_mlp_probe" > "$out/probe_mma.txt" 2>&1; echo "probe mma: exit $?"
  timeout 120 "$bin/fused_mlp_simt_probe" 64,256,3 > "$out/probe_simt.txt" 2>&1; echo "probe simt: exit $?"
}
part_compare() {
  timeout 400 python3 bench/compare.py --mlpc "$bin/mlpc" --opt 2 --out "$out/compare" \
    --cases tcnn_w64,tcnn_w128,tcnn_w32,narrow_gelu,mlp3_small_relu \
    > "$out/compare.md" 2> "$out/compare.err"
  echo "compare: exit $?"; grep -E '^\|' "$out/compare.md"
}
for part in ${parts//,/ }; do
  "part_$part"
done
