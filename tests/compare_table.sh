#!/usr/bin/env bash
# bench/compare.py --table-from: the harness's table from a saved run (the H200's, sixth session
# of 2026-12-03), without a GPU or torch: ratios against the targets with their verdicts, five
# decimals where three would hide one, the compile times.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(python3 "$root/bench/compare.py" --table-from "$root/tests/data/compare_h200_2026-12-03.json")
echo "$out"
name=compare_table
source "$root/tests/script_checks.sh"
expect "| linear (M=1024) | 21.4 | 54.5 | 123.6 | 11.7 | 2.9 | 1 | 0.137 ✓ | ≤ 0.15 | True |"
expect "| mlp3 (M=8192) | 8358.1 | 8409.3 | 8440.7 | 8483.0 | 8274.8 | 5 | 0.99004 ✗ | ≤ 0.99 |"
expect "| llama_geglu (M=4096) |"
expect "| 0.953 ✗ | ≤ 0.90 |"
expect "| 6.41e-03 (agrees) | 734 / 1.8 |"
[[ $(grep -c "^| " <<<"$out") == 8 ]] || { echo "compare_table: expected a header and 7 rows"; exit 1; }
echo "compare_table: ok"
