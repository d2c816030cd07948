#!/usr/bin/env bash
# Runs each fuzz target for SECONDS, one at a time, from its seed corpus (fuzz/corpus/<target>,
# read only: new inputs go to a scratch dir), and prints libFuzzer's final stats per target.
# Usage: fuzz/run_fuzzers.sh SECONDS [BUILD_DIR] [TARGET...]
#   BUILD_DIR: a -DMLPC_FUZZ=ON build (default build-fuzz); TARGETs: default all that are built.
# A crash, leak, timeout or sanitizer report stops that target and fails the script; the input
# is kept as BUILD_DIR/fuzz-artifacts/<target>/crash-* (copy it to
# tests/data/fuzz_regressions/<target>/ once fixed: the normal test suite replays it).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:?usage: fuzz/run_fuzzers.sh SECONDS [BUILD_DIR] [TARGET...]}
build=${2:-build-fuzz}
shift $(($# < 2 ? $# : 2))
targets=("$@")
((${#targets[@]})) || targets=(parser pipeline safetensors)

status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/fuzz_$t"
  if [[ ! -x $exe ]]; then
    echo "fuzz_$t: not built in $build, skipped"
    continue
  fi
  scratch=$(mktemp -d)
  artifacts="$build/fuzz-artifacts/$t/"
  mkdir -p "$artifacts"
  dict=()
  [[ $t == parser || $t == pipeline ]] && dict=(-dict=fuzz/mlp.dict)
  log="$build/fuzz-$t.log"
  echo "== fuzz_$t for ${seconds}s (log: $log)"
  # One process (what -jobs=1 gives, without its extra log files). max_len bounds the inputs
  # libFuzzer makes up (seeds may be longer); -timeout: one input taking more than 120 s of wall
  # time is a hang (every seed takes well under a second, but at nice 19 on a loaded machine
  # wall time runs far ahead of CPU time); rss_limit: unbounded allocation is a bug too.
  nice -n 19 "$exe" -max_total_time="$seconds" -max_len=4096 -timeout=120 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts" "${dict[@]}" \
    "$scratch" "fuzz/corpus/$t" > "$log" 2>&1
  rc=$?
  grep -E '^#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added' "$log"
  if [[ $rc -ne 0 ]]; then
    echo "fuzz_$t: FAILED (exit $rc); the end of its log:"
    tail -n 40 "$log"
    status=1
  fi
  rm -rf "$scratch"
done
exit $status
