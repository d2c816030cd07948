#!/usr/bin/env bash
# The gated GEMM kernel's epilogue workers and split tail tiles, checked and measured in one call
# on the GPU machine, cheapest and most telling first: the gated GPU tests (reference at batches
# that split and do not), compute-sanitizer racecheck and memcheck on them, the kernel's variants
# side by side (bench/gated_gemm_probe, the article's, Llama's and around Llama's tail), then the
# harness on the cases that run the kernel, and llama_geglu's kernels under Nsight Compute.
# Usage: bench/gated_verify_run.sh OUT_DIR [BIN_DIR] [PARTS]   (BIN_DIR: stage/bin; PARTS: a
# comma list of tests,sanitize,probe,compare,ncu, default all: ~8 minutes, more than one call)
set -uo pipefail
out=${1:?usage: bench/gated_verify_run.sh OUT_DIR [BIN_DIR] [PARTS]}
bin=${2:-stage/bin}
parts=${3:-tests,sanitize,probe,compare,ncu}
want() { [[ ",$parts," == *",$1,"* ]]; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache} PYTHONUNBUFFERED=1
if want tests; then
  timeout 240 "$bin/mlpc_gpu_tests" "[gated_gemm]" > "$out/gpu_gated.log" 2>&1
  echo "gated GPU tests: exit $?"; tail -n 2 "$out/gpu_gated.log"
fi
if want sanitize; then
  # ffn at batch 1000: blocks of two tiles hand the first over to the epilogue workers; the
  # split-tail test: deep K, tiles split in 4 k-ranges, three launches on one executor. Only
  # hazards in mlpc's kernels count (cuBLAS's own kernels report some of their own).
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck memcheck; do
    timeout 240 "$cs" --tool "$tool" "$bin/mlpc" run --sample ffn -O1 --gated-gemms on \
      --batch 1000 --no-cuda-graph > "$out/${tool}_ffn.log" 2>&1
    echo "$tool (ffn, batch 1000: tiles handed over): exit $?"
    timeout 240 "$cs" --tool "$tool" "$bin/mlpc_gpu_tests" "split tail tiles*" \
      > "$out/${tool}_split.log" 2>&1
    echo "$tool (split tail tiles test): exit $?"
    for f in "$out/${tool}"_*.log; do
      echo "  $(basename "$f"): $(grep -c 'Error: Race reported.* mlpc_\|Invalid __' "$f") in mlpc kernels;" \
        "$(grep -E 'SUMMARY' "$f")"
    done
  done
fi
if want probe; then
  timeout 300 "$bin/gated_gemm_probe" 8192,3072,768 4096,14336,4096 4096,12672,4096 \
    1000,3000,760 16,3072,768 > "$out/gated_probe.txt" 2>&1
  echo "gated probe: exit $?"; grep -E "cuBLASLt tuned|gated kernel" "$out/gated_probe.txt"
fi
if want compare; then
  timeout 420 python3 "$here/compare.py" --mlpc "$bin/mlpc" --opt 2 \
    --cases geglu,geglu_m16,llama_geglu,ffn --out "$out/cmp" > "$out/compare.txt" 2>&1
  echo "compare: exit $?"; tail -n 15 "$out/compare.txt"
fi
if want ncu; then
  timeout 300 "$here/llama_ncu.sh" "$bin/mlpc" "$out/ncu"
  echo "ncu: exit $?"
fi
