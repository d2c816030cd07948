#!/usr/bin/env bash
# One device call checking a refactor against the binaries before it: every plan at -O0/-O1/-O2
# (stage/base/mlpc then stage/bin/mlpc, one tuning cache, so -O2's measured decisions compare
# on the same measurements), the GPU suite, each sample's cold and warm -O2 compile, and the
# PyTorch harness for both binaries. Writes logs under OUT.
# Usage: bench/redesign_gpu_run.sh OUT [PARTS]   PARTS: comma list of plans,suite,compile,compare
# All four take longer than one device call allows: run suite, then plans,compile, then compare.
set -uo pipefail
out=${1:?usage: bench/redesign_gpu_run.sh OUT [PARTS]}
parts=${2:-plans,suite,compile,compare}
mkdir -p "$out"
want() { [[ ",$parts," == *",$1,"* ]]; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } 2>&1 | tee "$out/machine.txt"
if want plans; then
  export MLPC_CACHE_DIR=/tmp/mlpc-plans-cache
  for b in base bin; do
    timeout 280 python3 bench/plan_snapshot.py "stage/$b/mlpc" --levels > "$out/plans_$b.txt" 2>&1
    echo "plans $b: exit $?, $(wc -l < "$out/plans_$b.txt") lines"
  done
  diff "$out/plans_base.txt" "$out/plans_bin.txt" > "$out/plans.diff"
  echo "plans differing: $(grep -c '^>' "$out/plans.diff")"
  unset MLPC_CACHE_DIR
fi
if want suite; then
  export MLPC_CACHE_DIR=/tmp/mlpc-suite-cache
  timeout 500 stage/bin/mlpc_gpu_tests --durations yes > "$out/gpu_suite.log" 2>&1
  echo "gpu suite: exit $?"; tail -n 3 "$out/gpu_suite.log"
  unset MLPC_CACHE_DIR
fi
if want compile; then
  for b in base bin; do
    for s in $(stage/bin/mlpc samples | awk '{print $1}'); do
      MLPC_CACHE_DIR=$(mktemp -d) timeout 120 "stage/$b/mlpc" bench --sample "$s" -O2 --json \
        > "$out/bench_${b}_$s.json" 2> "$out/bench_${b}_$s.err"
      python3 -c "
import json, sys; d = json.load(open(sys.argv[1])); d = d[0] if isinstance(d, list) else d; m = d['modes']['compiled']
print(f\"$b $s: cold {m.get('compile_cold_ms', float('nan')):.0f} ms, warm {m.get('compile_warm_ms', float('nan')):.1f} ms\")" \
        "$out/bench_${b}_$s.json" 2>&1 | tail -n 1
    done
  done | tee "$out/compile_times.txt"
fi
if want compare; then
  for b in base bin; do
    timeout 280 python3 bench/compare.py --mlpc "stage/$b/mlpc" --opt 2 --out "$out/compare_$b" \
      > "$out/compare_$b.md" 2> "$out/compare_$b.err"
    echo "compare $b: exit $?"; grep -E '^\|' "$out/compare_$b.md" | tail -n 9
  done
fi
