#!/usr/bin/env bash
# Every .cu file that `mlpc compile --dump-dir` writes compiles on its own with
# `nvcc -cubin -arch=sm_90` (gated GEMM kernels, which use WGMMA: -arch=sm_90a): for every
# sample, eager (-O0), fused (-O1), with epilogues (-O2) and with gated GEMMs forced on.
# Usage: tests/nvcc_dump_check.sh MLPC NVCC
set -euo pipefail
mlpc=$1
nvcc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count=0
for sample in $("$mlpc" samples | awk '{print $1}'); do
  for level in 0 1 2 2g; do
    dir="$work/$sample-O$level"
    flags=(-O "${level%g}")
    [ "$level" = 2g ] && flags+=(--gated-gemms on)
    "$mlpc" compile --sample "$sample" "${flags[@]}" --dump-dir "$dir" > /dev/null
    for cu in "$dir"/kernels/*.cu; do
      [ -e "$cu" ] || continue
      arch=sm_90
      grep -q "wgmma" "$cu" && arch=sm_90a
      "$nvcc" -cubin -arch=$arch "$cu" -o "$cu.cubin"
      count=$((count + 1))
    done
  done
done
echo "compiled $count dumped kernels with nvcc -cubin -arch=sm_90 (gated GEMMs: sm_90a)"
[ "$count" -gt 0 ]
