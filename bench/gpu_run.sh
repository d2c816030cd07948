#!/usr/bin/env bash
# On the GPU machine: the GPU tests, then `mlpc bench --json` for every sample, logs under $1.
# Usage: bench/gpu_run.sh OUT_DIR [BIN_DIR]   (BIN_DIR holds mlpc and mlpc_gpu_tests)
set -uo pipefail
out=${1:?usage: bench/gpu_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
"$bin/mlpc_gpu_tests" --durations yes > "$out/gpu_tests.log" 2>&1
echo "gpu tests: exit $?" | tee -a "$out/gpu_tests.log"
tail -3 "$out/gpu_tests.log"
for s in linear geglu mlp3; do
  "$bin/mlpc" bench --sample "$s" --json > "$out/bench_$s.json" 2> "$out/bench_$s.err"
  echo "bench $s: exit $?"
done
python3 - "$out" <<'PY'
import json, sys, glob, os
print(f"{'sample':<8} {'eager us':>9} {'compiled us':>12} {'speedup':>8} {'launches':>9} {'max_abs_err e/c':>22}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'bench_*.json'))):
    try: r = json.load(open(f))
    except Exception as e: print(f, 'unreadable', e); continue
    e, c = r['modes']['eager'], r['modes']['compiled']
    print(f"{r['graph']:<8} {e['median_us']:>9.1f} {c['median_us']:>12.1f} {r['speedup']:>8.3f} "
          f"{e['launches']:>4}/{c['launches']:<4} {e['max_abs_err']:>10.3g}/{c['max_abs_err']:<10.3g} "
          f"ok={e['within_tolerance'] and c['within_tolerance']}")
PY
