#!/usr/bin/env bash
# One device call for "use it from C++ and PyTorch" and "checks that can fail": the GPU tests
# (the library API and the fault table first), examples/cpp against `mlpc run` on the same files,
# the torch.compile backend bench and the leak check, then the rest of the GPU suite. Reads
# stage/ (bench/stage_gpu.sh fills it), writes logs under OUT.
# Usage: bench/use_gpu_run.sh OUT [PARTS]   PARTS: comma list of api,faults,example,torch,leak,suite
set -uo pipefail
out=${1:?usage: bench/use_gpu_run.sh OUT [PARTS]}
parts=${2:-api,faults,example,torch,leak,suite}
bin=stage/bin
mkdir -p "$out"
want() { [[ ",$parts," == *",$1,"* ]]; }
export MLPC_CACHE_DIR=/tmp/mlpc-cache PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/stage/py${PYTHONPATH:+:$PYTHONPATH}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 --version
  python3 -c 'import torch; print("torch", torch.__version__)'; } 2>&1 | tee "$out/machine.txt"
if want api; then
  timeout 300 "$bin/mlpc_gpu_tests" "[api]" > "$out/gpu_api.log" 2>&1
  echo "gpu [api]: exit $?"; tail -n 3 "$out/gpu_api.log"
fi
if want faults; then
  timeout 400 "$bin/mlpc_gpu_tests" "[faults]" -s > "$out/gpu_faults_full.log" 2>&1
  echo "gpu [faults]: exit $?"
  grep -E '^\|' "$out/gpu_faults_full.log" > "$out/fault_table.md"
  grep -E "faults injected|test cases|FAILED" "$out/gpu_faults_full.log" | head -20
fi
if want example; then
  w=$(mktemp -d)
  python3 -c "import numpy as np; np.save('$w/x.npy', np.random.default_rng(3).standard_normal((100, 768)).astype(np.float32))"
  for level in 1 2; do
    "$bin/mlpc" run --sample geglu -O$level --input "$w/x.npy" --save-weights "$w/w.safetensors" \
      --output "$w/y_run$level.npy" > "$out/example_run$level.txt" 2>&1
    "$bin/geglu_example" --weights "$w/w.safetensors" --input "$w/x.npy" --output "$w/y_ex$level.npy" \
      --level $level > "$out/example_ex$level.txt" 2>&1
    echo "example -O$level: exit $?"
    python3 -c "
import numpy as np; a = np.load('$w/y_run$level.npy'); b = np.load('$w/y_ex$level.npy')
print('  example vs mlpc run -O$level: shape', a.shape, 'max |diff|', float(np.abs(a - b).max()), 'identical', bool((a == b).all()))" | tee -a "$out/example.txt"
  done
fi
if want torch; then
  timeout 560 python3 bench/torch_backend_bench.py --json "$out/torch_backend.json" \
    > "$out/torch_backend.md" 2> "$out/torch_backend.err"
  echo "torch backend bench: exit $?"; cat "$out/torch_backend.md" | tail -n 40; tail -n 5 "$out/torch_backend.err"
fi
if want leak; then
  timeout 300 python3 bench/python_leak_check.py > "$out/leak.txt" 2>&1
  echo "leak check: exit $?"; tail -n 12 "$out/leak.txt"
fi
if want suite; then
  timeout 500 "$bin/mlpc_gpu_tests" "~[faults]" "~[api]" --durations yes > "$out/gpu_suite.log" 2>&1
  echo "gpu suite (rest): exit $?"; tail -n 3 "$out/gpu_suite.log"
fi
