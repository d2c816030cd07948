#!/usr/bin/env bash
# Every .cu file that `mlpc compile --dump-dir` writes compiles on its own with
# `nvcc -cubin -arch=sm_90`: for every sample, eager (-O0), fused (-O1) and with epilogues (-O2).
# Usage: tests/nvcc_dump_check.sh MLPC NVCC
set -euo pipefail
mlpc=$1
nvcc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count=0
for sample in $("$mlpc" samples | awk '{print $1}'); do
  for level in 0 1 2; do
    dir="$work/$sample-O$level"
    "$mlpc" compile --sample "$sample" -O "$level" --dump-dir "$dir" > /dev/null
    for cu in "$dir"/kernels/*.cu; do
      [ -e "$cu" ] || continue
      "$nvcc" -cubin -arch=sm_90 "$cu" -o "$cu.cubin"
      count=$((count + 1))
    done
  done
done
echo "compiled $count dumped kernels with nvcc -cubin -arch=sm_90"
[ "$count" -gt 0 ]
