#!/usr/bin/env bash
# One device call that fits the tool's limits: runs bench/final_run.sh PARTS into a scratch dir
# (and bench/sweep_run.sh when PARTS has "sweep"), then the reduction benches, and, with the
# time left under BUDGET seconds, the GPU tests under compute-sanitizer; packs every file under 2 MB into OUT/all.tgz (the tool returns few files,
# none large; the .npy and .safetensors data of compare.py stay behind).
# Usage: bench/device_call.sh OUT [PARTS] [BUDGET]
set -uo pipefail
out=${1:?usage: bench/device_call.sh OUT [PARTS] [BUDGET]}
parts=${2:-compare,tests}
budget=${3:-560}
bin=stage/bin
w=$(mktemp -d)
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache}
left() { echo $((budget - SECONDS)); }
GPU_TESTS_TIMEOUT=150 bench/final_run.sh "$w" "$bin" "$parts" 2>&1 | tee "$w/final_run.log" | tail -15
if [[ ",$parts," == *",sweep,"* ]]; then  # not a final_run.sh part: batch sweeps, small GEMMs
  timeout $(( $(left) > 60 ? $(left) - 30 : 30 )) bench/sweep_run.sh "$w/sweep" "$bin" 2>&1 | tail -40
fi
mkdir -p "$w/rows"
for f in bench/rows_4096/*.mlp; do
  ((  $(left) > 30 )) || break
  n=$(basename "$f" .mlp)
  timeout 30 "$bin/mlpc" bench "$f" --batch 8192 --json > "$w/rows/$n.json" 2> "$w/rows/$n.err"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); [print(sys.argv[2], s['name'], round(s['us'],1), 'us', round(s['gbps']), 'GB/s') for s in r['modes']['compiled']['steps']]" "$w/rows/$n.json" "$n"
done
if (( $(left) > 200 )); then
  MLPC_SANITIZE_BUDGET=$(( $(left) - 20 )) MLPC_SANITIZE_TESTS="${SANITIZE_TESTS:-[reduction],[small_gemm]}" \
    bench/sanitize_gpu.sh "$w/sanitize" "$bin" > "$w/sanitize.log" 2>&1
  echo "sanitize: exit $?"; tail -14 "$w/sanitize/summary.txt"
fi
find "$w" -type f -size +2M -delete
tar czf "$out/all.tgz" -C "$w" .
