#!/usr/bin/env python3
"""Leaks through the Python API, on the GPU: compile -> run -> free cycles over small blocks, then
many runs of one module, with device memory (torch.cuda.mem_get_info) and host RSS printed at
start and end; and an NVRTC failure in the middle of a compile (a bogus arch) must be one clean
mlpc.Error, after which compiling works again. Exit 1 when memory grows past the bounds below.

  python3 bench/python_leak_check.py [--cycles 1000] [--runs 100000] [--level 2]
"""

import argparse
import gc
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "tests", "python"))
import models  # noqa: E402

try:
    import mlpc  # noqa: E402  (installed: pip install . or the wheel)
except ImportError:  # a checkout: its python/ (the extension must be built beside it)
    sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))
    import mlpc  # noqa: E402

BLOCKS = ["sequential_mlp", "t5_small_ff", "llama2_7b_mlp", "gpt2_mlp", "bert_base_ffn"]
DEVICE_SLACK = 64 << 20  # bytes the device may lose over the whole check (allocator noise)
HOST_SLACK = 256 << 20


def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    return 0


def used():
    free, total = torch.cuda.mem_get_info()
    return total - free


def show(what):
    torch.cuda.synchronize()
    gc.collect()
    print(f"{what:<34} device used {used() / 2**20:9.1f} MiB   host RSS {rss() / 2**20:8.1f} MiB",
          flush=True)
    return used(), rss()


def small(name, scale=16):
    m, d = models.build(name, scale=scale)
    m = m.cuda()
    x = torch.randn(16, d, device="cuda", dtype=next(m.parameters()).dtype)
    return m, x


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=1000)
    p.add_argument("--runs", type=int, default=100000)
    p.add_argument("--level", type=int, default=2,
                   help="the compile level of the cycles (1 skips -O2's measurements: faster)")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("python_leak_check: needs a CUDA GPU", file=sys.stderr)
        return 1
    ok = True
    with torch.no_grad():
        # Warm up once per block so caches (kernel cache, cuBLASLt, torch's allocator) are full.
        for name in BLOCKS:
            m, x = small(name)
            mlpc.compile(m, [x])(x)
        dev0, host0 = show("start (after one warm-up each)")
        for i in range(args.cycles):
            m, x = small(BLOCKS[i % len(BLOCKS)])
            cm = mlpc.compile(m, [x], level=args.level)
            cm(x)
            del cm, m, x
            if (i + 1) % max(1, args.cycles // 5) == 0:
                show(f"after {i + 1} compile/run/free cycles")
        dev1, host1 = show("end of the cycles")

        m, x = small("llama2_7b_mlp")
        cm = mlpc.compile(m, [x])
        y = cm(x)
        dev2, host2 = show("one module, before the runs")
        for _ in range(args.runs):
            y = cm(x)
        dev3, host3 = show(f"after {args.runs} runs")
        del y

        try:
            mlpc.compile(m, [x], arch="sm_1")
            print("FAIL: a compile for arch sm_1 succeeded")
            ok = False
        except mlpc.Error as e:
            print(f"a bogus arch: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        again = mlpc.compile(m, [x])
        err = (again(x) - cm(x)).abs().max().item()
        print(f"compiles again after the failure; max difference from the first module: {err:.3g}")
        ok &= err == 0.0
    for what, a, b, slack in [("device, cycles", dev0, dev1, DEVICE_SLACK),
                              ("host, cycles", host0, host1, HOST_SLACK),
                              ("device, runs", dev2, dev3, DEVICE_SLACK),
                              ("host, runs", host2, host3, HOST_SLACK)]:
        grew = b - a
        print(f"{what}: grew {grew / 2**20:.1f} MiB (bound {slack >> 20} MiB)"
              f"{'' if grew <= slack else '  FAIL'}")
        ok &= grew <= slack
    print("python_leak_check: PASS" if ok else "python_leak_check: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
