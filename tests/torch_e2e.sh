#!/usr/bin/env bash
# End to end against PyTorch on the CPU: export the article's GeGLU MLP and GPT-2's MLP with
# tools/export_torch.py, run them with `mlpc run --device cpu` (the fp64 reference) on the
# exported input, and compare with PyTorch's own output (tools/compare_torch.py: mlpc's tolerance,
# runtime/reference/tolerance.h). Also checks that an unsupported module is refused with its ops
# named.
# Usage: torch_e2e.sh MLPC_BINARY. Exit 77 (skipped) only when no python3 has torch.
set -euo pipefail
mlpc=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian's python3-torch lives in /usr/bin/python3, which a pyenv or venv python3 may shadow.
python=
for p in "${PYTHON:-}" python3 /usr/bin/python3; do
  if [[ -n $p ]] && "$p" -c 'import torch' 2>/dev/null; then python=$p; break; fi
done
if [[ -z $python ]]; then
  echo "torch_e2e: skipped: python3 torch missing (scripts/setup.sh installs python3-torch)"
  exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
batch=4  # small: the fp64 reference of a 768x3072 MLP is quick at a few rows

for case in "geglu.py:GeGLU" "gpt2_mlp.py:GPT2MLP" "norm_softmax.py:NormSoftmax"; do
  module=$root/tests/torch/$case
  out=$work/${case%%.py*}
  echo "== $case"
  "$python" "$root/tools/export_torch.py" --module "$module" --example-shape "$batch,768" -o "$out"
  "$mlpc" run --device cpu "$out/model.mlp" --weights "$out/weights.safetensors" \
    --input "$out/input.npy" --output "$out/y.npy"
  "$python" "$root/tools/compare_torch.py" --module "$module" --weights "$out/weights.safetensors" \
    --input "$out/input.npy" --output "$out/y.npy"
done

echo "== a module of two inputs: exported, run and compared with both, in order"
module=$root/tests/torch/gated_two_inputs.py:GatedTwoInputs
out=$work/two
"$python" "$root/tools/export_torch.py" --module "$module" --example-shape "$batch,64" \
  --example-shape "$batch,32" -o "$out" | tee "$work/export.log"
grep -q "input.npy, input1.npy (the inputs, in order" "$work/export.log"
"$mlpc" run --device cpu "$out/model.mlp" --weights "$out/weights.safetensors" \
  --input "$out/input.npy" "$out/input1.npy" --output "$out/y.npy"
"$python" "$root/tools/compare_torch.py" --module "$module" --weights "$out/weights.safetensors" \
  --input "$out/input.npy" "$out/input1.npy" --output "$out/y.npy"
if "$python" "$root/tools/compare_torch.py" --module "$module" --weights "$out/weights.safetensors" \
     --input "$out/input.npy" --output "$out/y.npy" 2>"$work/err"; then
  echo "torch_e2e: FAIL: compare_torch.py ran a two-input module on one input"; exit 1
fi
grep -q "takes 2 input(s), 1 --input file(s) given" "$work/err"

echo "== an unsupported module is refused, each op named with its line"
if "$python" "$root/tools/export_torch.py" --module "$root/tests/torch/unsupported.py:Unsupported" \
     --example-shape 2,16 -o "$work/unsupported" 2>"$work/err"; then
  echo "torch_e2e: FAIL: the export of unsupported.py succeeded"; exit 1
fi
cat "$work/err"
grep -q "leaky_relu at .*unsupported.py:13" "$work/err"
grep -q "cumsum at .*unsupported.py:14" "$work/err"
[[ ! -e $work/unsupported/model.mlp ]]
echo "torch_e2e: PASS"
