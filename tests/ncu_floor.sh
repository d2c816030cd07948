#!/usr/bin/env bash
# bench/ncu_floor.py on reports bench/llama_ncu.sh wrote on the GPU machine (tests/data/ncu_llama,
# as ncu wrote them: times in ns, clocks in hz, thousands separators; their run is in
# docs/benchmarks.md):
# per-kernel rows, each forward's sum, mlpc's ratio to each PyTorch forward and its floor at 100%
# tensor-pipe activity, what docs/benchmarks.md's "What limits" quotes; and its one-line errors
# on bad reports.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=$root/tests/data/ncu_llama
floor=(python3 "$root/bench/ncu_floor.py")
out=$("${floor[@]}" mlpc="$data/mlpc.csv" "torch eager=$data/torch_eager.csv" \
  torch.compile="$data/torch_compile.csv")
echo "$out"
name=ncu_floor
source "$root/tests/script_checks.sh"
expect "mlpc: 2 kernels, 1786.0 us"
expect "torch eager: 5 kernels, 1982.0 us"
expect "torch.compile: 4 kernels, 1930.9 us"
expect "  mlpc_fused_gelu_tanh_mul_0                                  1199.3  1.59    95.09   26.7"
expect "  vectorized_elementwise_kernel[GeluCUDAKernelImpl]             75.7  1.95     0.61   84.5"
expect "  vectorized_elementwise_kernel[MulFunctor]"
expect "  triton_poi_fused_gelu_mul_0                                  132.8  1.95     2.73   75.7"
expect "mlpc with its GEMMs' tensor pipes busy throughout: 1718.4 us (measured 1786.0)"
expect "mlpc / torch eager: 0.901 measured, floor 0.867"
expect "mlpc / torch.compile: 0.925 measured, floor 0.890"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
grep -v gpu__time_duration "$data/mlpc.csv" > "$scratch/no_time.csv"
echo "==PROF== nothing profiled" > "$scratch/empty.csv"
sed 's/"ns"/"fortnight"/' "$data/mlpc.csv" > "$scratch/bad_unit.csv"
fails_as_mlpc() {  # the report in mlpc's place, the message expected
  fails "${floor[@]}" mlpc="$1" "torch eager=$data/torch_eager.csv" "$2"
}
fails_as_mlpc "$scratch/no_time.csv" "no gpu__time_duration.sum for mlpc_fused_gelu_tanh_mul_0"
fails_as_mlpc "$scratch/empty.csv" "no kernels (was it written by \`ncu --csv\`?)"
fails_as_mlpc "$scratch/bad_unit.csv" "bad_unit.csv: gpu__time_duration.sum in unit 'fortnight'"
fails_as_mlpc "$scratch/missing.csv" "No such file"
echo "ncu_floor: ok"
