#!/usr/bin/env bash
# GPU side of issue 4 (where the time goes), one call on the GPU machine: `mlpc bench --explain` for
# linear, geglu at x[8192, 768] and at x[16, 768]; a Chrome trace of geglu; the GPU tests of the
# trace, the calibration and explain; and an nsys check that the NVTX ranges carry mlpc's names.
# Usage: bench/explain_run.sh OUT_DIR [BIN_DIR]
set -uo pipefail
out=${1:?usage: bench/explain_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt"

run() {  # run NAME CMD...: stdout+stderr to OUT/NAME.log, exit code echoed
  local name=$1; shift
  timeout 300 "$@" > "$out/$name.log" 2>&1
  echo "$name: exit $?"
}
run explain_linear "$bin/mlpc" bench --sample linear --explain
run explain_geglu_8192 "$bin/mlpc" bench --sample geglu --batch 8192 --explain
run explain_geglu_16 "$bin/mlpc" bench --sample geglu --batch 16 --explain
run explain_geglu_json "$bin/mlpc" bench --sample geglu --batch 8192 --explain --json
run trace_geglu "$bin/mlpc" bench --sample geglu --batch 8192 --trace "$out/geglu_trace.json"
python3 - "$out/geglu_trace.json" > "$out/trace_check.log" 2>&1 <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
x = [e for e in t["traceEvents"] if e["ph"] == "X"]
for e in x:
    assert all(k in e for k in ("name", "ts", "dur", "pid", "tid")), e
by_track = {}
for e in x:
    by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["name"], e["dur"]))
for k, v in sorted(by_track.items()):
    print(k, len(v), "events:", ", ".join(f"{n} {d:.1f}us" for _, n, d in v))
print("ok:", len(x), "X events")
PY
echo "trace check: exit $? ($(tail -1 "$out/trace_check.log"))"
run gpu_tests_insight "$bin/mlpc_gpu_tests" "[trace],[explain]"
if command -v nsys > /dev/null; then
  timeout 300 nsys profile --trace=cuda,nvtx --force-overwrite=true -o "$out/geglu_nsys" \
    "$bin/mlpc" bench --sample geglu --batch 8192 > "$out/nsys_profile.log" 2>&1
  echo "nsys profile: exit $?"
  timeout 120 nsys stats --report nvtx_sum --format csv "$out/geglu_nsys.nsys-rep" \
    > "$out/nsys_nvtx_sum.csv" 2>> "$out/nsys_profile.log"
  echo "nsys nvtx_sum: exit $? ($(grep -c -E 'gemm_|mlpc_' "$out/nsys_nvtx_sum.csv") mlpc ranges)"
  rm -f "$out/geglu_nsys.sqlite"
fi
for f in explain_linear explain_geglu_8192 explain_geglu_16; do
  echo "== $f"; grep -E "where the time goes|->" "$out/$f.log"
done
