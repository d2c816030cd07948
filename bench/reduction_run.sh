#!/usr/bin/env bash
# On the GPU machine: issue 5's checks. The reduction GPU tests, `mlpc bench` of the ffn,
# ffn_swiglu and classifier samples (-O2: residual through the GEMM's C), and the row kernels'
# effective bandwidth on bf16[8192, 4096] (rmsnorm, layernorm, softmax; target >= 3.5 TB/s).
# Usage: bench/reduction_run.sh OUT_DIR [BIN_DIR]   (BIN_DIR holds mlpc and mlpc_gpu_tests)
set -uo pipefail
out=${1:?usage: bench/reduction_run.sh OUT_DIR [BIN_DIR]}
bin=${2:-stage/bin}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1

"$bin/mlpc_gpu_tests" "[reduction]" --durations yes > "$out/gpu_tests_reduction.log" 2>&1
echo "gpu reduction tests: exit $?" | tee -a "$out/gpu_tests_reduction.log"
"$bin/mlpc_gpu_tests" "samples match the reference in every dtype, eager and compiled" \
  > "$out/gpu_tests_samples.log" 2>&1
echo "gpu sample tests: exit $?" | tee -a "$out/gpu_tests_samples.log"

for s in ffn ffn_swiglu classifier; do
  for o in 1 2; do
    "$bin/mlpc" bench --sample "$s" -O "$o" --json > "$out/bench_${s}_O$o.json" 2> "$out/bench_${s}_O$o.err"
    echo "bench $s -O$o: exit $?"
  done
  "$bin/mlpc" compile --sample "$s" -O 2 --json > "$out/plan_$s.json" 2> "$out/plan_$s.err"
done
# The 4-launch plan of issue 5: norm kernel, one merged gate|up GEMM, one pointwise, down + residual.
"$bin/mlpc" bench --sample ffn -O 2 --merge-gemms on --json > "$out/bench_ffn_O2merge.json" \
  2> "$out/bench_ffn_O2merge.err"
echo "bench ffn -O2 --merge-gemms on: exit $?"

# One row kernel per graph at the bandwidth shape; the compiled plan is that kernel alone.
for op in rmsnorm layernorm softmax; do
  case $op in
    rmsnorm) body='%w = param bf16[4096]
  %y = rmsnorm %x, %w, 1e-05 : bf16[M, 4096]' ;;
    layernorm) body='%w = param bf16[4096]
  %b = param bf16[4096]
  %y = layernorm %x, %w, %b, 1e-05 : bf16[M, 4096]' ;;
    softmax) body='%y = softmax %x : bf16[M, 4096]' ;;
  esac
  printf 'func @%s_4096(%%x: bf16[M, 4096]) -> bf16[M, 4096] {\n  %s\n  return %%y\n}\n' \
    "$op" "$body" > "$out/${op}_4096.mlp"
  "$bin/mlpc" bench "$out/${op}_4096.mlp" --batch 8192 --json > "$out/bench_${op}_4096.json" \
    2> "$out/bench_${op}_4096.err"
  echo "bench ${op}_4096: exit $?"
done

python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
def load(name):
    try: return json.load(open(os.path.join(out, name)))
    except Exception as e: print(name, 'unreadable:', e); return None
print(f"{'graph':<22} {'eager us':>9} {'compiled us':>12} {'speedup':>8} {'launches e/c':>13} ok")
for s in ['ffn', 'ffn_swiglu', 'classifier']:
    for o in (1, 2):
        r = load(f'bench_{s}_O{o}.json')
        if not r: continue
        e, c = r['modes']['eager'], r['modes']['compiled']
        print(f"{s + ' -O' + str(o):<22} {e['median_us']:>9.1f} {c['median_us']:>12.1f} "
              f"{r['speedup']:>8.3f} {e['launches']:>6}/{c['launches']:<6} "
              f"{e.get('within_tolerance')} {c.get('within_tolerance')}")
for name in ['bench_ffn_O2merge.json', 'bench_ffn_O2.json']:
    r = load(name)
    if not r: continue
    print(name, 'launches', r['modes']['compiled']['launches'])
    us = r['modes']['compiled']['median_us']
    print(f"ffn target: compiled {us:.1f} us / best PyTorch 250.7 us (anchors.md) = {us/250.7:.3f}"
          f" (target <= 0.85; rerun bench/torch_baseline.py in the same session for the ratio)")
print(f"{'row kernel bf16[8192,4096]':<28} {'us':>8} {'GB/s':>8}  (target >= 3500 GB/s)")
for op in ['rmsnorm', 'layernorm', 'softmax']:
    r = load(f'bench_{op}_4096.json')
    if not r: continue
    for st in r['modes']['compiled']['steps']:
        if st['kind'] == 'reduction':
            print(f"{op + ' ' + st['name']:<28} {st['us']:>8.1f} {st['gbps']:>8.0f}  "
                  f"{'PASS' if st['gbps'] >= 3500 else 'FAIL'}")
PY
