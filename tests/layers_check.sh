#!/usr/bin/env bash
# The layers hold: each folder includes only the folders below it (the table), and the host-only
# folders include no CUDA header. Fails with one line per offending #include.
# Usage: tests/layers_check.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}"

# folder: the folders its files may include, besides itself. "-": no CUDA header allowed.
declare -A allowed=(
  [ir]="-"
  [host]="- ir"
  [passes]="- ir"
  [codegen]="ir passes"
  [io]="- ir host"
  [runtime/reference]="- ir host"
  [runtime/device]="ir"
  [runtime/jit]="ir host passes codegen runtime/device"
  [runtime/gemm]="ir host passes codegen runtime/device"
  [runtime/exec]="ir host passes codegen runtime/device runtime/gemm"
  [runtime/measure]="ir host passes codegen runtime/device runtime/jit runtime/gemm runtime/exec"
)

status=0
for folder in "${!allowed[@]}"; do
  deps=" $folder ${allowed[$folder]} "
  for f in "$folder"/*.h "$folder"/*.cpp; do
    [[ -e $f ]] || continue
    while IFS=: read -r line inc; do
      if [[ $inc =~ ^#include\ \"([^\"]+)/[^/\"]+\" ]]; then
        dir=${BASH_REMATCH[1]}
        if [[ $deps != *" $dir "* ]]; then
          echo "$f:$line: $folder/ may not include ${inc#\#include }"
          status=1
        fi
      elif [[ $deps == *" - "* && $inc =~ ^#include\ \<(cuda|cublas|nvrtc|nvtx|cuda_runtime) ]]; then
        echo "$f:$line: $folder/ is host-only, yet includes ${inc#\#include }"
        status=1
      fi
    done < <(grep -n '^#include ' "$f" || true)
  done
done
((status == 0)) && echo "layers: every #include points down"
exit $status
