#!/usr/bin/env bash
# compute-sanitizer over the GPU side, in one call on the GPU machine: memcheck (with leak check)
# and racecheck on the GPU tests and on a few `mlpc run` / `mlpc bench` runs with small batches
# (every kernel shape, -O0/-O1/-O2, CUDA graphs on and off, GEMM tuning).
# Usage: bench/sanitize_gpu.sh OUT_DIR [BIN_DIR]      (BIN_DIR: stage/bin)
# Writes OUT_DIR/<tool>.<run>.log (the sanitizer's report), <tool>.<run>.out (the program's own
# output) and OUT_DIR/summary.txt: one line per run with its exit code and error count, then
# "total errors: N". Exits 0 only when every run passed with zero reports.
# MLPC_SANITIZE_TIMEOUT (seconds per run, default 900) bounds each run; a timeout counts as a
# failure (exit 124 in the summary). MLPC_SANITIZE_TESTS, a Catch test spec without spaces
# (e.g. "[reduction],[merge],*pointwise*"), limits the GPU tests checked (default: all of them;
# under memcheck they take about 20x their plain time).
set -uo pipefail
out=${1:?usage: bench/sanitize_gpu.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[[ -x $cs ]] || { echo "sanitize_gpu.sh: compute-sanitizer not found" >&2; exit 1; }
# A fresh kernel cache: the NVRTC-built CUBINs are the ones checked, and nothing stale is loaded.
export MLPC_CACHE_DIR="$out/cache"
rm -rf "$MLPC_CACHE_DIR"
limit=${MLPC_SANITIZE_TIMEOUT:-900}

# name|command (words split on spaces)
runs=(
  "gpu_tests|$bin/mlpc_gpu_tests ${MLPC_SANITIZE_TESTS:-}"
  "run_geglu_O1|$bin/mlpc run --sample geglu --batch 64"
  "run_mlp3_small_O0|$bin/mlpc run --sample mlp3_small --batch 33 -O0 --no-cuda-graph"
  "run_linear_O2|$bin/mlpc run --sample linear --batch 17 -O2"
  "run_llama_geglu_O2|$bin/mlpc run --sample llama_geglu --batch 8 -O2 --no-gemm-tuning"
  "bench_mlp3_small|$bin/mlpc bench --sample mlp3_small --batch 1,48"
)

summary="$out/summary.txt"
: > "$summary"
total=0
failed=0
for tool in memcheck racecheck; do
  case $tool in
    memcheck) flags=(--tool memcheck --leak-check full --check-api-memory-access yes) ;;
    racecheck) flags=(--tool racecheck --racecheck-report all) ;;
  esac
  for r in "${runs[@]}"; do
    name=${r%%|*}
    read -r -a cmd <<< "${r#*|}"
    log="$out/$tool.$name.log"
    echo "== $tool $name: ${cmd[*]}"
    timeout "$limit" "$cs" "${flags[@]}" --error-exitcode 86 --log-file "$log" "${cmd[@]}" \
      > "$out/$tool.$name.out" 2>&1
    rc=$?
    # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed
    # (E errors, W warnings)". Warnings count too: zero reports means zero of everything.
    if [[ $tool == memcheck ]]; then
      errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
    else
      errors=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
    fi
    have_summary=$(grep -cE '(ERROR|RACECHECK) SUMMARY' "$log" 2>/dev/null || true)
    line="$tool $name: exit $rc, $errors reports"
    [[ ${have_summary:-0} -eq 0 ]] && line+=" (no sanitizer summary: see the log)"
    echo "$line" | tee -a "$summary"
    total=$((total + errors))
    if [[ $rc -ne 0 || $errors -ne 0 || ${have_summary:-0} -eq 0 ]]; then failed=$((failed + 1)); fi
  done
done
echo "total errors: $total; failed runs: $failed" | tee -a "$summary"
[[ $failed -eq 0 ]]
