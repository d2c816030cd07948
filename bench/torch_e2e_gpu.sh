#!/usr/bin/env bash
# Issue 6 on the GPU machine: the article's GeGLU MLP and GPT-2's MLP exported from PyTorch (2.x
# here) with tools/export_torch.py, run by `mlpc run --device cuda` (-O1 and -O2, f32 / bf16 / f16)
# and `mlpc bench` on the exported weights and input, and compared with PyTorch's own CUDA output
# (tools/compare_torch.py: mlpc's tolerance against the float64 answer, twice it against PyTorch).
# Usage: bench/torch_e2e_gpu.sh OUT_DIR [BIN_DIR]   (BIN_DIR: where mlpc is; default stage/bin)
# Writes OUT_DIR/summary.txt (one PASS/FAIL line per check) and a log per step; exits 1 if any
# check fails.
set -uo pipefail
out=${1:?usage: bench/torch_e2e_gpu.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache} PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
summary=$out/summary.txt
: > "$summary"
failed=0

# step NAME CMD...: runs CMD with its output in OUT_DIR/NAME.log; records PASS/FAIL.
step() {
  local name=$1; shift
  if timeout 300 "$@" > "$out/$name.log" 2>&1; then
    echo "PASS $name" | tee -a "$summary"
  else
    echo "FAIL $name (exit $?; see $name.log)" | tee -a "$summary"
    failed=1
  fi
}

{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

for case in geglu.py:GeGLU gpt2_mlp.py:GPT2MLP; do
  module=$root/tests/torch/$case
  name=${case%%.py*}
  for batch in 8 8192; do
    dir=$out/$name-$batch
    step "$name-$batch-export" "$python" "$root/tools/export_torch.py" --module "$module" \
      --example-shape "$batch,768" -o "$dir"
    for dtype in f32 bf16 f16; do
      for opt in 1 2; do
        tag=$name-$batch-$dtype-O$opt
        step "$tag-run" "$bin/mlpc" run --device cuda "$dir/model.mlp" --dtype "$dtype" -O "$opt" \
          --weights "$dir/weights.safetensors" --input "$dir/input.npy" --output "$dir/y-$dtype-O$opt.npy"
        step "$tag-compare" "$python" "$root/tools/compare_torch.py" --module "$module" \
          --weights "$dir/weights.safetensors" --input "$dir/input.npy" \
          --output "$dir/y-$dtype-O$opt.npy" --dtype "$dtype" --device cuda
      done
    done
    # bench on the same files: its compiled output goes to --output, compared the same way.
    step "$name-$batch-bf16-bench" "$bin/mlpc" bench "$dir/model.mlp" --dtype bf16 -O 2 --json \
      --weights "$dir/weights.safetensors" --input "$dir/input.npy" --output "$dir/y-bench.npy"
    step "$name-$batch-bf16-bench-compare" "$python" "$root/tools/compare_torch.py" \
      --module "$module" --weights "$dir/weights.safetensors" --input "$dir/input.npy" \
      --output "$dir/y-bench.npy" --dtype bf16 --device cuda
    rm -f "$dir"/*.npy "$dir"/weights.safetensors  # large; the logs hold the results
  done
done

# torch 2.x: an unsupported module is still refused with each op and its line.
if "$python" "$root/tools/export_torch.py" --module "$root/tests/torch/unsupported.py:Unsupported" \
     --example-shape 2,16 -o "$out/unsupported" > "$out/unsupported-export.log" 2>&1; then
  echo "FAIL unsupported-export (it succeeded)" | tee -a "$summary"; failed=1
elif grep -q "leaky_relu at .*unsupported.py:13" "$out/unsupported-export.log" &&
     grep -q "cumsum at .*unsupported.py:14" "$out/unsupported-export.log"; then
  echo "PASS unsupported-export" | tee -a "$summary"
else
  echo "FAIL unsupported-export (ops or lines not named)" | tee -a "$summary"; failed=1
fi

# One line per comparison for the report.
grep -H "mlpc    vs" "$out"/*-compare.log > "$out/errors.txt" 2>/dev/null
echo "summary: $(grep -c ^PASS "$summary") passed, $(grep -c ^FAIL "$summary") failed"
exit $failed
