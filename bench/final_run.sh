#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, `mlpc bench -O1 --json` for every sample (the plain
# torch.compile-like level), the GEMM and pointwise probes, the PyTorch side-by-side at -O2 (same
# weights and input, outputs compared), one compile over many batches, and the other GPU scripts
# under bench/ when present (explain/trace, reductions, PyTorch end to end, compute-sanitizer).
# Usage: bench/final_run.sh OUT_DIR [BIN_DIR] [PARTS]   PARTS: comma list, default all
set -uo pipefail
out=${1:?usage: bench/final_run.sh OUT_DIR [BIN_DIR] [PARTS]}
bin=${2:-stage/bin}
parts=${3:-tests,bench,o2,probe,compare,batches,explain,reduction,e2e,sanitize}
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache} PYTHONUNBUFFERED=1
want() { [[ ",$parts," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"
if want tests; then
  timeout ${GPU_TESTS_TIMEOUT:-300} "$bin/mlpc_gpu_tests" > "$out/gpu_tests.log" 2>&1
  echo "gpu tests: exit $?"; tail -n 2 "$out/gpu_tests.log"
fi
if want bench; then
  for s in linear geglu mlp3; do
    timeout 120 "$bin/mlpc" bench --sample "$s" -O1 --json > "$out/bench_O1_$s.json" 2>> "$out/bench.err"
    echo "bench -O1 $s: exit $?"
  done
  timeout 120 "$bin/mlpc" compile --sample geglu -O2 > "$out/compile_geglu_O2.txt" 2>&1
  echo "compile geglu -O2: exit $?"
fi
if want o2; then  # -O2 decisions (merge, epilogues) measured here, and merge on/off side by side
  for s in geglu llama_geglu mlp3 linear mlp3_small ffn; do
    timeout 120 "$bin/mlpc" bench --sample "$s" -O2 --json > "$out/O2_$s.json" 2>> "$out/bench.err"
    echo "bench -O2 $s: exit $?"
    timeout 60 "$bin/mlpc" compile --sample "$s" -O2 > "$out/compile_O2_$s.txt" 2>&1
  done
  for m in on off; do
    timeout 60 "$bin/mlpc" bench --sample geglu -O2 --merge-gemms $m --json > "$out/O2_geglu_merge_$m.json" 2>> "$out/bench.err"
    timeout 60 "$bin/mlpc" bench --sample llama_geglu -O2 --merge-gemms $m --json > "$out/O2_llama_merge_$m.json" 2>> "$out/bench.err"
  done
fi
if want probe; then
  timeout 240 "$bin/gemm_probe" --exhaustive 8192,3072,768 8192,6144,768 8192,768,3072 > "$out/gemm_probe.txt" 2>&1
  echo "gemm probe: exit $?"
  timeout 200 python3 bench/pointwise_variants.py > "$out/pointwise.txt" 2>&1; echo "pointwise: exit $?"
fi
if want batches; then
  timeout 120 "$bin/mlpc" bench --sample geglu -O2 --batch 1,16,256,4096,8192 > "$out/geglu_batches.txt" 2>&1
  echo "geglu batches: exit $?"
fi
if want compare; then
  timeout 500 python3 bench/compare.py --mlpc "$bin/mlpc" --opt 2 --out "$out" 2>&1 | grep -v Warn
fi
for part in explain reduction e2e sanitize; do
  want "$part" || continue
  case $part in
    explain) script=bench/explain_run.sh ;;
    reduction) script=bench/reduction_run.sh ;;
    e2e) script=bench/torch_e2e_gpu.sh ;;
    sanitize) script=bench/sanitize_gpu.sh ;;
  esac
  [[ -x $script ]] || { echo "$part: no $script"; continue; }
  # e2e runs 54 export/run/compare steps (minutes of them); sanitize bounds itself per run.
  limit=300
  [[ $part == e2e ]] && limit=480
  [[ $part == sanitize ]] && limit=590
  timeout $limit "$script" "$out/$part" "$bin" > "$out/$part.log" 2>&1
  echo "$part: exit $?"; tail -n 3 "$out/$part.log"
done
