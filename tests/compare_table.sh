#!/usr/bin/env bash
# bench/compare.py --table-from: the harness's table from a saved run (tests/data/compare_*.json,
# kept from the GPU machine), without a GPU or torch: ratios against the targets with their
# verdicts, five decimals where three would hide one, the compile times; and the table of the
# GPU's clocks.
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
[[ $out != *"GPU while timed"* ]] || { echo "compare_table: a clock table from a run that recorded none"; exit 1; }

# A run that recorded the GPU's clock and power on both sides (a made-up two-case file): a second
# table with the best PyTorch mode's and mlpc compiled's, and why where one is missing.
out=$(python3 "$root/bench/compare.py" --table-from "$root/tests/data/compare_clocks.json")
echo "$out"
expect "| llama_geglu (M=4096) | default | 1453 MHz, 688 W, cap 90%, thermal 5% | 1399 MHz, 694 W, cap 97% |"
expect "| linear (M=1024) | eager | not recorded | no NVML (libnvidia-ml.so.1: cannot open shared object file) |"
expect "| llama_geglu (M=4096) | 2236.9 | 2148.3 | - | 2182.7 | 1992.2 | 2 | 0.927 ✗ | ≤ 0.90 |"
# The harness's sampler (bench/nvml_monitor.py) summarizes as mlpc bench does, and without a
# driver says why it has nothing.
out=$(python3 - "$root/bench" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import nvml_monitor as n
s = n.summarize([(1410, 690000, 0x4), (1410, 690000, 0x5), (1990, 510000, 0), (1830, 600000, 0x20)], 1980, 700000)
print(n.describe(s), s["sm_mhz_min"], s["sm_mhz_max"], s["power_limit_w"], s["power_reading"])
print(n.describe(n.summarize([(1980, 300000, 0, True), (1980, 500000, 0, False)], 1980, 700000)))
with n.Monitor(period_s=0.001) as m:
    pass
print("monitor:", "samples" in m.summary or m.summary["unavailable"].startswith("no NVML"))
PY
)
echo "$out"
expect "1660 MHz, 622 W, cap 50%, thermal 25% 1410 1990 700.0 instant"
expect "1980 MHz, 400 W (1 s avg), cap 0%"
expect "monitor: True"
echo "compare_table: ok"
