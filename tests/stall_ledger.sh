#!/usr/bin/env bash
# bench/stall_ledger.py on the per-instruction page bench/gated_stalls.sh wrote on the GPU
# machine (llama_geglu's gated kernel, one launch, PC sampling; the columns the ledger reads, as
# ncu wrote them; the run is in docs/benchmarks.md): the k-loop's split, the mbarrier waits and
# their retries, what docs/benchmarks.md's "What limits" quotes; and its one-line errors on bad
# input.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=$root/tests/data/ncu_llama/gated_sass.csv
ledger=(python3 "$root/bench/stall_ledger.py")
out=$("${ledger[@]}" "$data")
echo "$out"
name=stall_ledger
source "$root/tests/script_checks.sh"
expect "mlpc_fused_gelu_tanh_mul_0: 1464 instructions, 120389 warp samples"
expect "    0xcc0    1835008  64.0%   92  @!P0 BRA 0x7f9a3b7b25f0: long_sb 99%"
expect "   0x1280      29152   1.3%   10  WARPGROUP.DEPBAR.LE gsb0, 0x0: barrier 100%"
expect "k-loop at 0xcc0: 1835008 warp iterations, 64.0% of all samples"
expect "   37.7%  waiting for a stage's data (mbarrier try-wait)"
expect "   20.6%  waiting for earlier WGMMAs (WARPGROUP.DEPBAR)"
expect "   13.2%  issuing WGMMAs (HGMMA)"
expect "    0xd20    1835008   0.4%  retried 671004 times at 0x59f0 (0.37 per wait)"
expect "   0x2530      28672   0.0%  retried 0 times at 0x5a20 (0.00 per wait)"
expect "   0x47f0     229376   0.0%  retried 300472 times at 0x5a90 (1.31 per wait)"
expect "   0x4cb0    1761554   0.2%  spins in line (every try counted)"
# --min-share hides the small blocks
if "${ledger[@]}" "$data" --min-share 5 | grep -qF "0x1280"; then echo "stall_ledger: --min-share 5 kept 0x1280"; exit 1; fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sed 's/"Warp Stall Sampling (All Samples)"/"Samples"/' "$data" > "$scratch/no_samples.csv"
echo "==PROF== nothing" > "$scratch/empty.csv"
head -n 2 "$data" > "$scratch/header_only.csv"
fails "${ledger[@]}" "$scratch/no_samples.csv" "no_samples.csv: no column 'Warp Stall Sampling (All Samples)' (collect with --section SourceCounters)"
fails "${ledger[@]}" "$scratch/empty.csv" "empty.csv: no CSV rows (was it written by \`ncu --page source --csv\`?)"
fails "${ledger[@]}" "$scratch/header_only.csv" "header_only.csv: no instructions"
fails "${ledger[@]}" "$scratch/missing.csv" "No such file"
fails "${ledger[@]}" "$data" --min-share "usage: stall_ledger.py SASS.csv [--min-share PERCENT]"
echo "stall_ledger: ok"
