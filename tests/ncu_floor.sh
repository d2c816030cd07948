#!/usr/bin/env bash
# bench/ncu_floor.py on Nsight Compute reports in `ncu --csv`'s layout (tests/data/ncu_llama: the
# per-kernel numbers of the 2026-12-04 H200 run that README's "What limits" quotes, mlpc's times
# in msecond, PyTorch's in usecond): per-kernel rows, each forward's sum, mlpc's ratio and its
# floor at 100% tensor-pipe activity; and its one-line errors on bad reports.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=$root/tests/data/ncu_llama
floor="python3 $root/bench/ncu_floor.py"
out=$($floor mlpc="$data/mlpc.csv" "torch eager=$data/torch_eager.csv")
echo "$out"
expect() {
  if ! grep -qF -- "$1" <<<"$out"; then echo "ncu_floor: missing: $1"; exit 1; fi
}
expect "mlpc: 2 kernels, 1805.9 us"
expect "torch eager: 5 kernels, 1943.1 us"
expect "vectorized_elementwise_kernel[GeluCUDAKernelImpl]             66.7  1.60     0.00   89.5"
expect "vectorized_elementwise_kernel[MulFunctor]"
expect "mlpc with its GEMMs' tensor pipes busy throughout: 1733.7 us (measured 1805.9)"
expect "mlpc / torch eager: 0.929 measured, floor 0.892"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
grep -v gpu__time_duration "$data/mlpc.csv" > "$scratch/no_time.csv"
echo "==PROF== nothing profiled" > "$scratch/empty.csv"
sed 's/"msecond"/"fortnight"/' "$data/mlpc.csv" > "$scratch/bad_unit.csv"
fails() {  # the report, the message expected: one line, exit status 1
  local msg rc=0
  msg=$($floor mlpc="$1" "torch eager=$data/torch_eager.csv" 2>&1) || rc=$?
  if [[ $rc != 1 || $(wc -l <<<"$msg") != 1 || $msg != *"$2"* ]]; then
    echo "ncu_floor: $1: expected one line with '$2' and exit 1, got $rc: $msg"; exit 1
  fi
}
fails "$scratch/no_time.csv" "no gpu__time_duration.sum for mlpc_fused_gelu_tanh_mul_0"
fails "$scratch/empty.csv" "no kernels (was it written by \`ncu --csv\`?)"
fails "$scratch/bad_unit.csv" "in unit 'fortnight'"
fails "$scratch/missing.csv" "No such file"
echo "ncu_floor: ok"
