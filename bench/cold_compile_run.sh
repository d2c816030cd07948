#!/usr/bin/env bash
# On the GPU machine: every sample's cold and warm -O2 compile, with where the cold one went.
# For each binary staged (stage/bin/mlpc, and stage/base/mlpc when present: the binaries before a
# change, to check its decisions stay the same), per sample:
#   bench    `mlpc bench --sample S -O2 --json` in a fresh MLPC_CACHE_DIR, MLPC_LOGS=builds:
#            compile_cold_ms (compile() with every mlpc cache empty, in a directory of its own;
#            NVRTC's own cache is off), compile_warm_ms, compile_cold_phases, and the GEMM
#            algorithms the compiled forward ran (heuristic_index per tuning key);
#   process  `mlpc compile --sample S -O2 --json` in a new process and a fresh MLPC_CACHE_DIR,
#            then again in that directory: wall ms of a cold process (CUDA's start included) and
#            a warm one; its build log is one cold compile's (each tuning and decision timing,
#            `timed …` lines), summed in the table.
# Prints one line per binary and sample, then (two binaries) every sample whose plan or GEMM
# algorithms differ. Logs (JSON, stderr with the build logs) under OUT.
# Usage: bench/cold_compile_run.sh OUT [SAMPLE[:BATCH] ...]   (default: every sample at its
#        default batch). Env: BINS="bin base" (default: bin, and base when stage/base/mlpc is);
#        BENCH=0 skips the bench runs (the table then shows the cold process's compile phases).
set -uo pipefail
out=${1:?usage: bench/cold_compile_run.sh OUT [SAMPLE[:BATCH] ...]}
shift
mkdir -p "$out"
bins=${BINS:-bin$([[ -x stage/base/mlpc ]] && echo " base")}
cases=("$@")
if ((${#cases[@]} == 0)); then
  mapfile -t cases < <(stage/bin/mlpc samples | awk '{print $1}')
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader
  for b in $bins; do echo "$b: $(git log -1 --format='%h %s' 2>/dev/null) ($(stat -c %y "stage/$b/mlpc"))"; done
} 2>&1 | tee "$out/machine.txt"

ms_now() { date +%s%N | awk '{printf "%.1f", $1 / 1e6}'; }
for c in "${cases[@]}"; do
  s=${c%%:*}
  batch=()
  [[ $c == *:* ]] && batch=(--batch "${c#*:}")
  for b in $bins; do
    tag="${b}_${c/:/_m}"
    if [[ ${BENCH:-1} != 0 ]]; then
      dir=$(mktemp -d)
      MLPC_CACHE_DIR=$dir MLPC_LOGS=builds timeout 300 "stage/$b/mlpc" bench --sample "$s" \
        "${batch[@]}" -O2 --json > "$out/${tag}_bench.json" 2> "$out/${tag}_bench.err"
      echo "$tag bench: exit $?" >> "$out/exits.txt"
      rm -rf "$dir"
    fi
    dir=$(mktemp -d)
    for run in cold warm; do
      t0=$(ms_now)
      MLPC_CACHE_DIR=$dir MLPC_LOGS=builds timeout 120 "stage/$b/mlpc" compile --sample "$s" \
        "${batch[@]}" -O2 --json > "$out/${tag}_compile_$run.json" 2> "$out/${tag}_compile_$run.err"
      rc=$?
      t1=$(ms_now)
      echo "$tag compile $run: exit $rc, $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') ms" \
        >> "$out/exits.txt"
    done
    rm -rf "$dir"
  done
done

python3 - "$out" $bins -- "${cases[@]}" <<'PY'
import json, os, re, sys
out = sys.argv[1]
sep = sys.argv.index("--")
bins, cases = sys.argv[2:sep], sys.argv[sep + 1:]

def load(path):
    try:
        d = json.load(open(path))
    except (OSError, ValueError):
        return None
    return d[0] if isinstance(d, list) and d else d

walls = {}
for line in open(os.path.join(out, "exits.txt")):
    m = re.match(r"(\S+) compile (cold|warm): exit (\d+), ([\d.]+) ms", line)
    if m:
        walls[(m[1], m[2])] = (int(m[3]), float(m[4]))

def timed_lines(path):
    """The cold compile's `timed` lines: (tunings, their ms), (other timings, their ms)."""
    tune = [0, 0.0]
    other = [0, 0.0]
    try:
        text = open(path).read()
    except OSError:
        return tune, other
    for m in re.finditer(r"timed (.*?): setup ([\d.]+) ms, timing ([\d.]+) ms", text):
        which = tune if m[1].startswith("cuBLASLt's candidates") else other
        which[0] += 1
        which[1] += float(m[3])
    return tune, other

print("| binary | sample | cold ms | warm ms | passes | plan (waited, timed) | kernels | NVRTC sum "
      "| process cold / warm ms | tunings (n, ms) | plan timings (n, ms) | launches | compiled us |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
plans = {}
for c in cases:
    for b in bins:
        tag = f"{b}_{c.replace(':', '_m')}"
        r = load(os.path.join(out, f"{tag}_bench.json"))
        cold = load(os.path.join(out, f"{tag}_compile_cold.json"))
        pc = walls.get((tag, "cold"), (1, float("nan")))
        pw = walls.get((tag, "warm"), (1, float("nan")))
        (tn, tms), (on, oms) = timed_lines(os.path.join(out, f"{tag}_compile_cold.err"))
        if not r and cold:  # BENCH=0: compile()'s phases in the cold process
            ms = lambda k: cold.get(k, float("nan"))
            total = ms("passes_ms") + ms("plan_ms") + ms("kernels_ms")
            print(f"| {b} | {c} | **{total:.0f}** (process) | | {ms('passes_ms'):.0f} "
                  f"(timed {ms('passes_timing_ms'):.0f}) | {ms('plan_ms'):.0f} | "
                  f"{ms('kernels_ms'):.0f} | {ms('nvrtc_ms'):.0f} | {pc[1]:.0f} / {pw[1]:.0f} "
                  f"| {tn}, {tms:.0f} | {on}, {oms:.0f} | {cold.get('launches')} | |")
        if not r:
            if not cold:
                print(f"| {b} | {c} | bench failed: see {tag}_bench.err | | | | | | "
                      f"{pc[1]:.0f} / {pw[1]:.0f} | {tn}, {tms:.0f} | {on}, {oms:.0f} | | |")
            continue
        m = r["modes"]["compiled"]
        ph = m.get("compile_cold_phases") or {}
        g = lambda k: ph.get(k, float("nan"))
        print(f"| {b} | {c} (M={r['batch']}) | **{m['compile_cold_ms']:.0f}** | {m['compile_warm_ms']:.1f} "
              f"| {g('passes_ms'):.0f} | {g('plan_ms'):.0f} ({g('plan_build_wait_ms'):.0f}, "
              f"{g('plan_timing_ms'):.0f}) | {g('kernels_ms'):.0f} | {g('nvrtc_ms'):.0f} "
              f"| {pc[1]:.0f} / {pw[1]:.0f} | {tn}, {tms:.0f} | {on}, {oms:.0f} "
              f"| {m['launches']} | {m['median_us']:.1f} |")
        plan = None
        if cold:
            plan = (cold.get("launches"),
                    [(k.get("name"), k.get("kind"), tuple(k.get("ops", []))) for k in cold.get("kernels", [])],
                    [(x.get("step"), x.get("taken")) for x in cold.get("gemm_choices", [])])
        algos = {x["key"]: x["heuristic_index"] for x in m.get("gemms", [])}
        us = {x["key"]: x["us"] for x in m.get("gemms", [])}
        plans[(b, c)] = (plan, algos, us, m["launches"])

if len(bins) > 1:
    a, z = bins[0], bins[1]
    print(f"\nDecisions, {a} against {z}:")
    for c in cases:
        x, y = plans.get((a, c)), plans.get((z, c))
        if not x or not y:
            print(f"  {c}: not comparable (a run failed)")
            continue
        notes = []
        if x[0] != y[0]:
            notes.append("plan differs (launches, kernels or generated-kernel choices: "
                         f"{c.replace(':', '_m')}_compile_cold.json)")
        if x[3] != y[3]:
            notes.append(f"bench launches {x[3]} vs {y[3]}")
        for key in sorted(set(x[1]) | set(y[1])):
            if x[1].get(key) != y[1].get(key):
                notes.append(f"{key}: heuristic #{x[1].get(key)} ({x[2].get(key, 0):.1f} us) vs "
                             f"#{y[1].get(key)} ({y[2].get(key, 0):.1f} us)")
        print(f"  {c}: " + ("same plan and GEMM algorithms" if not notes else "\n    ".join([""] + notes)))
PY
