#!/usr/bin/env python3
"""The side-by-side run on the GPU machine: PyTorch (eager, torch.compile default and
reduce-overhead) and mlpc (eager and compiled) on every case of shared/anchors.md, in one run.
Prints a markdown table of per-forward times and the ratio mlpc compiled / best PyTorch mode.

Usage: python3 bench/compare.py --mlpc stage/bin/mlpc [--opt 2] [--out DIR] [--cases ...]
"""
import argparse, json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
# case: (mlpc sample, batch)
CASES = {
    "linear": ("linear", 1024),
    "geglu": ("geglu", 8192),
    "geglu_m16": ("geglu", 16),
    "mlp3": ("mlp3", 8192),
    "mlp3_small_relu": ("mlp3_small", 64),
    "llama_geglu": ("llama_geglu", 4096),
}


def run_json_lines(cmd, log):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{p.stdout}\n{p.stderr}\n")
    if p.returncode != 0:
        print(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}", file=sys.stderr)
    out = []
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlpc", default="build/compiler/mlpc")
    ap.add_argument("--opt", default="2")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    cases = args.cases.split(",")
    log = os.path.join(args.out, "compare.log") if args.out else None
    if args.out:
        os.makedirs(args.out, exist_ok=True)

    rows = []
    for case in cases:
        sample, batch = CASES[case]
        torch_r = run_json_lines([sys.executable, os.path.join(HERE, "torch_baseline.py"),
                                  "--cases", case], log)
        p = subprocess.run([args.mlpc, "bench", "--sample", sample, "--batch", str(batch),
                            "-O", args.opt, "--json"], capture_output=True, text=True)
        if log:
            with open(log, "a") as f:
                f.write(p.stdout + p.stderr)
        try:
            m = json.loads(p.stdout)
        except json.JSONDecodeError:
            print(f"mlpc bench failed for {case}: {p.stderr}", file=sys.stderr)
            continue
        t = torch_r[0] if torch_r else {}
        rows.append((case, sample, batch, t, m))

    lines = ["| case | PyTorch eager | compile default | reduce-overhead | mlpc eager | mlpc compiled "
             "| launches | ratio mlpc / best PyTorch | mlpc within tolerance |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case, sample, batch, t, m in rows:
        e, c = m["modes"]["eager"], m["modes"]["compiled"]
        best = t.get("best_us", float("nan"))
        f = lambda mode: f"{t[mode]['median_us']:.1f}" if mode in t else "-"
        lines.append(f"| {case} (M={batch}) | {f('eager')} | {f('default')} | {f('reduce-overhead')} "
                     f"| {e['median_us']:.1f} | {c['median_us']:.1f} | {c['launches']} "
                     f"| {c['median_us'] / best:.3f} | {e['within_tolerance'] and c['within_tolerance']} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(os.path.join(args.out, "compare.md"), "w") as f:
            f.write(table + "\n")
        with open(os.path.join(args.out, "compare.json"), "w") as f:
            json.dump([{"case": r[0], "torch": r[3], "mlpc": r[4]} for r in rows], f, indent=1)


if __name__ == "__main__":
    main()
