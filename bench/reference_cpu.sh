#!/usr/bin/env bash
# How long the fp64 CPU reference takes at the samples' default sizes: `mlpc run --device cpu`
# end to end (seeded values, the forward, the summary), wall time and peak memory per sample,
# with the machine's load beside it (a busy machine makes every figure larger).
# Usage: bench/reference_cpu.sh MLPC_BINARY [SAMPLE ...]   (default: geglu mlp3 ffn)
set -euo pipefail
mlpc=${1:?usage: bench/reference_cpu.sh MLPC_BINARY [SAMPLE ...]}
shift
samples=("$@")
((${#samples[@]})) || samples=(geglu mlp3 ffn)
echo "cores: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for s in "${samples[@]}"; do
  /usr/bin/time -f "$s: %e s wall, %M KB peak" "$mlpc" run --sample "$s" --device cpu >/dev/null
done
