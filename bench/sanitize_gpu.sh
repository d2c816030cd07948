#!/usr/bin/env bash
# compute-sanitizer over the GPU side, in one call on the GPU machine: memcheck (with leak check)
# and racecheck on the GPU tests and on a few `mlpc run` / `mlpc bench` runs with small batches
# (every kernel shape, -O0/-O1/-O2, CUDA graphs on and off, GEMM tuning).
# Usage: bench/sanitize_gpu.sh OUT_DIR [BIN_DIR]      (BIN_DIR: stage/bin)
# Writes OUT_DIR/<tool>.<run>.log (the sanitizer's report), <tool>.<run>.out (the program's own
# output) and OUT_DIR/summary.txt: one line per run with its exit code and error count, then
# "total errors: N". Exits 0 only when every run passed with zero reports.
# MLPC_SANITIZE_TIMEOUT (seconds per run, default 900) bounds each run, or MLPC_SANITIZE_BUDGET
# (seconds for the whole script) gives each run an even share of the time left; a timeout counts
# as a failure (exit 124 in the summary). MLPC_SANITIZE_TESTS, a Catch test spec without spaces
# (e.g. "[reduction],[merge],*pointwise*"), limits the GPU tests checked (default: all of them;
# under memcheck they take many times their plain time).
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

# name|command (words split on spaces). Between them every kind of generated kernel runs:
# pointwise (geglu, mlp3_small -O0), row reductions with warp and block (shared-memory) combines
# (ffn's RMSNorm, classifier's softmax over 1000, a softmax over 4096), small-GEMM kernels, gated
# GEMM kernels (TMA, mbarriers, WGMMA; gate and up merged and apart), kernels storing TF32 parts
# (3xTF32: a split kernel and GELU kernels that store the parts).
runs=(
  "run_geglu_O1|$bin/mlpc run --sample geglu --batch 64"
  "run_mlp3_small_O0|$bin/mlpc run --sample mlp3_small --batch 33 -O0 --no-cuda-graph"
  "run_linear_O2|$bin/mlpc run --sample linear --batch 17 -O2"
  "run_llama_geglu_O2|$bin/mlpc run --sample llama_geglu --batch 8 -O2 --no-gemm-tuning"
  "bench_mlp3_small|$bin/mlpc bench --sample mlp3_small --batch 1,48"
  "run_small_gemms|$bin/mlpc run --sample mlp3_small --batch 37 -O2 --small-gemms on"
  "run_ffn_O2|$bin/mlpc run --sample ffn --batch 24 -O2"
  "run_classifier|$bin/mlpc run --sample classifier --batch 9"
  "run_softmax_4096|$bin/mlpc run bench/rows_4096/softmax_4096.mlp --batch 5"
  "run_gated_geglu|$bin/mlpc run --sample geglu --batch 300 -O2 --merge-gemms on --gated-gemms on"
  "run_gated_swiglu|$bin/mlpc run --sample ffn_swiglu --batch 130 -O2 --merge-gemms off --gated-gemms on"
  "run_mlp3_tf32x3|$bin/mlpc run --sample mlp3 --batch 20 -O2 --fp32-gemms tf32x3"
)
# The short runs under both tools first, then the GPU tests (the longest) under each.
jobs=()
for tool in memcheck racecheck; do for r in "${runs[@]}"; do jobs+=("$tool|$r"); done; done
jobs+=("memcheck|gpu_tests|$bin/mlpc_gpu_tests ${MLPC_SANITIZE_TESTS:-}"
       "racecheck|gpu_tests|$bin/mlpc_gpu_tests ${MLPC_SANITIZE_TESTS:-}")

# racecheck in cuBLAS's Hopper "nvjet" GEMM kernels (NVIDIA's code, which mlpc only calls) reports
# "potential WAR hazards" on shared memory whose current and incoming values are equal (many a
# run: docs/testing.md); excluding those kernels (--kernel-name-exclude kns=nvjet) made the
# sanitizer itself fail ("failed to handle a hardware exception"). So racecheck checks every kernel,
# and only hazards in mlpc's own kernels (generated: mlpc_*, small-GEMM gemm_*) count as reports;
# the others are counted apart, per kernel, in the summary.
ours='(mlpc_|gemm_)[A-Za-z0-9_]*'
hazard_kernels() {  # the kernel of each hazard's first access line, one per line
  grep -A1 -E 'hazard detected|Race reported' "$1" | grep -oE ' at [A-Za-z_][A-Za-z0-9_]*\+0x' |
    sed -E 's/^ at //; s/\+0x$//'
}

summary="$out/summary.txt"
: > "$summary"
total=0
failed=0
for ((j = 0; j < ${#jobs[@]}; ++j)); do
  tool=${jobs[j]%%|*}
  r=${jobs[j]#*|}
  case $tool in
    memcheck) flags=(--tool memcheck --leak-check full --check-api-memory-access yes) ;;
    racecheck) flags=(--tool racecheck --racecheck-report all) ;;
  esac
  name=${r%%|*}
  read -r -a cmd <<< "${r#*|}"
  # With a total budget, each run gets an even share of what is left.
  if [[ -n ${MLPC_SANITIZE_BUDGET:-} ]]; then
    limit=$(( (MLPC_SANITIZE_BUDGET - SECONDS) / (${#jobs[@]} - j) ))
    (( limit < 5 )) && limit=5
  fi
  log="$out/$tool.$name.log"
  echo "== $tool $name: ${cmd[*]}"
  started=$SECONDS
  timeout "$limit" "$cs" "${flags[@]}" --error-exitcode 86 --log-file "$log" "${cmd[@]}" \
    > "$out/$tool.$name.out" 2>&1
  rc=$?
  # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed
  # (E errors, W warnings)". Warnings count too: zero reports means zero of everything.
  if [[ $tool == memcheck ]]; then
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
  else
    all=$(grep -Eo 'RACECHECK SUMMARY: [0-9]+' "$log" | awk '{s += $3} END {print s + 0}')
    errors=$(hazard_kernels "$log" | grep -cE "^$ours$" || true)
    others=$(hazard_kernels "$log" | grep -vE "^$ours$" | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
    # Hazards that are all in library kernels leave the error exit code (86) behind: not ours.
    if [[ $rc -eq 86 && $errors -eq 0 && -n $others && $all -gt 0 ]]; then rc=0; fi
  fi
  have_summary=$(grep -cE '(ERROR|RACECHECK) SUMMARY' "$log" 2>/dev/null || true)
  if grep -q 'Internal Sanitizer Error' "$log" 2>/dev/null; then rc=99; fi  # the tool itself failed
  line="$tool $name: exit $rc, $errors reports, $((SECONDS - started)) s"
  [[ $tool == racecheck && -n ${others:-} ]] && line+=" (in library kernels, not counted: $others)"
  [[ ${have_summary:-0} -eq 0 ]] && line+=" (no sanitizer summary: see the log)"
  echo "$line" | tee -a "$summary"
  total=$((total + errors))
  if [[ $rc -ne 0 || $errors -ne 0 || ${have_summary:-0} -eq 0 ]]; then failed=$((failed + 1)); fi
done
echo "total errors: $total; failed runs: $failed" | tee -a "$summary"
[[ $failed -eq 0 ]]
