#!/usr/bin/env python3
"""Prints every plan mlpc makes for the samples and the fuzz corpus, one canonical line per
(graph, options, batch): launches, each step's kind, name, IR values, bytes and FLOPs, and every
buffer's bytes and layout. Two binaries' snapshots diff to the plans a change altered.

  bench/plan_snapshot.py build/compiler/mlpc > before.txt
  bench/plan_snapshot.py MLPC --levels   (-O0, -O1, -O2 only: on a GPU, -O2 measures)
"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The levels, and the GEMM rewrites forced on (without a GPU, -O2's measured choices keep
# cuBLASLt, so the rewrites are only planned when asked for).
OPTIONS = [
    ["-O0"], ["-O1"], ["-O2"],
    ["-O2", "--small-gemms", "on"], ["-O2", "--small-gemms", "mma"],
    ["-O2", "--gated-gemms", "on"], ["-O2", "--gated-gemms", "mma"],
    ["-O2", "--merge-gemms", "on"],
    ["-O2", "--fp32-gemms", "tf32x3"], ["-O2", "--transposed-x", "on"],
]
BATCHES = ["1", "16", "8192"]


def graphs():
    for f in sorted((ROOT / "samples").glob("*.mlp")):
        yield f
    for f in sorted((ROOT / "fuzz/corpus/pipeline").glob("*.mlp")):
        if not f.name.startswith("sample_"):
            yield f


def line(mlpc, path, opts, batch):
    r = subprocess.run([mlpc, "compile", str(path), *opts, "--batch", batch, "--json"],
                       capture_output=True, text=True)
    tag = f"{path.relative_to(ROOT)} {' '.join(opts)} --batch {batch}"
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"{tag}: exit {r.returncode}: {err}"
    d = json.loads(r.stdout)
    steps = [f"{k['kind']}:{k['name']}:{','.join(k['ir_nodes'])}:{k['bytes']}:{k.get('flops', 0):g}"
             for k in d["kernels"]]
    bufs = [f"{b['name']}:{b['role']}:{b['bytes']}:{b['layout']}" for b in d["buffers"]]
    taken = [c["step"] for c in d.get("gemm_choices", []) if c["taken"]]
    return f"{tag}: {d['launches']} launches | {' '.join(steps)} | {' '.join(bufs)} | taken {taken}"


def main():
    mlpc = sys.argv[1]
    options = OPTIONS[:3] if "--levels" in sys.argv[2:] else OPTIONS
    for path in graphs():
        for opts in options:
            for batch in BATCHES:
                print(line(mlpc, path, opts, batch), flush=True)


if __name__ == "__main__":
    main()
