#!/usr/bin/env bash
# Where the remaining time goes, on the GPU machine: the -O2 decisions of each sample as printed
# by `mlpc compile`, one-launch plans with and without a CUDA graph, and each large sample over a
# sweep of batch sizes (per-row cost vs batch: what splitting a batch into L2-sized row chunks
# would gain), and generated small-GEMM kernels against cuBLASLt on the tiny cases.
# Usage: bench/sweep_run.sh OUT_DIR [BIN_DIR]
set -uo pipefail
out=${1:?usage: bench/sweep_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
export MLPC_CACHE_DIR=${MLPC_CACHE_DIR:-/tmp/mlpc-cache}
m="$bin/mlpc"
for s in mlp3_small mlp3 geglu linear ffn; do timeout 60 "$m" compile --sample $s -O2 > "$out/c_$s.txt" 2>&1; done
timeout 60 "$m" bench --sample linear --batch 1024 -O2 --no-cuda-graph --json > "$out/linear_nograph.json" 2>&1
timeout 60 "$m" bench --sample mlp3_small --batch 64 -O2 --no-cuda-graph --json > "$out/small_nograph.json" 2>&1
timeout 60 "$m" bench --sample mlp3_small --batch 64 -O1 --json > "$out/small_O1.json" 2>&1
# Generated small-GEMM kernels against cuBLASLt on the tiny cases (compiled vs compiled).
for s in "linear 1024" "mlp3_small 64" "geglu 16" "geglu 256"; do
  read -r name rows <<< "$s"
  timeout 60 "$m" bench --sample "$name" --batch "$rows" -O2 --small-gemms on --json \
    > "$out/smallgemm_${name}_$rows.json" 2>&1
  timeout 60 "$m" bench --sample "$name" --batch "$rows" -O2 --json > "$out/cublaslt_${name}_$rows.json" 2>&1
done
timeout 100 "$m" bench --sample geglu -O2 --batch 512,1024,2048,4096,8192 --json > "$out/geglu_b.json" 2>&1
timeout 100 "$m" bench --sample ffn -O2 --batch 1024,2048,4096,8192 --json > "$out/ffn_b.json" 2>&1
timeout 150 "$m" bench --sample llama_geglu -O2 --batch 512,1024,2048,4096 --json > "$out/llama_b.json" 2>&1
timeout 150 "$m" bench --sample mlp3 -O2 --batch 1024,2048,8192 --json > "$out/mlp3_b.json" 2>&1
python3 - "$out" <<'PY'
import json, sys, os, glob
out = sys.argv[1]
def results(path):  # every bench result in a file of concatenated (pretty-printed) JSON values
    text, dec, i, found = open(path).read(), json.JSONDecoder(), 0, []
    while (j := text.find("{", i)) >= 0:
        try:
            value, i = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            i = j + 1
            continue
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, dict) and "modes" in v and "batch" in v: found.append(v)
            elif isinstance(v, dict): stack.extend(v.values())
            elif isinstance(v, list): stack.extend(v)
    return found
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    for r in results(f):
        c = r["modes"]["compiled"]
        print(f"{os.path.basename(f):<20} M={r['batch']:<6} {c['median_us']:9.1f} us  per 8192 rows "
              f"{c['median_us'] / r['batch'] * 8192:8.1f}  launches {c['launches']}  " +
              " ".join(f"{s['name']}={s['us']:.1f}" for s in c["steps"]))
PY
