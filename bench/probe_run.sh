#!/usr/bin/env bash
# Exploration on the GPU machine: every cuBLASLt candidate for the GeGLU GEMM shapes, PyTorch's
# own GEMM times for the same shapes, pointwise kernel variants, and mlpc's per-step times.
# Usage: bench/probe_run.sh OUT_DIR [BIN_DIR]
set -uo pipefail
out=${1:?usage: bench/probe_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache} PYTHONUNBUFFERED=1
timeout 200 "$bin/gemm_probe" > "$out/gemm_probe.txt" 2>&1; echo "gemm_probe: $?"
timeout 120 python3 - > "$out/torch_gemm.txt" 2>&1 <<'PY'
import torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
for m, n, k in [(8192,3072,768),(8192,6144,768),(8192,768,3072),(4096,14336,4096),(4096,28672,4096),(4096,4096,14336)]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    F.linear(x, w); torch.cuda.synchronize()
    best = 1e9
    for _ in range(3):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record()
        for _ in range(20): F.linear(x, w)
        e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) * 1e3 / 20)
    print(f"torch F.linear M={m} N={n} K={k}: {best:.1f} us {2*m*n*k/best/1e6:.0f} TFLOP/s")
PY
echo "torch gemm: $?"
timeout 200 python3 bench/pointwise_variants.py > "$out/pointwise.txt" 2>&1; echo "pointwise: $?"
timeout 120 "$bin/mlpc" bench --sample geglu -O2 --json > "$out/geglu_O2.json" 2>"$out/geglu_O2.err"; echo "bench: $?"
timeout 120 "$bin/mlpc" bench --sample llama_geglu -O2 --json > "$out/llama_O2.json" 2>>"$out/geglu_O2.err"; echo "bench llama: $?"
