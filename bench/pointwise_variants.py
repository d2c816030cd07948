#!/usr/bin/env python3
"""Times variants of one generated pointwise kernel (gelu_tanh * mul, bf16 [8192, 3072]) with CuPy,
next to torch.compile's fused kernel on the same tensors: GPU time per launch (CUDA events) and
effective bandwidth (2 reads + 1 write). Usage: python3 bench/pointwise_variants.py KERNEL.cu"""
import sys, re
import cupy as cp
import torch
import torch.nn.functional as F

src0 = open(sys.argv[1]).read()
name = re.search(r'__global__ void __launch_bounds__\(256\) (\w+)\(', src0).group(1)
M, N = 8192, 3072
n = M * N
g = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
u = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(g)
nbytes = 3 * n * 2

fast_tanh = src0.replace("tanhf(inner)", "(1.0f - 2.0f / (1.0f + __expf(2.0f * inner)))")
variants = {"as generated": (src0, None), "fast tanh": (fast_tanh, None)}

def time_it(fn, reps=50):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(reps): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / reps

ref = F.gelu(g.float(), approximate="tanh") * u.float()
for label, (src, _) in variants.items():
    mod = cp.RawModule(code=src, options=("-std=c++17", "-I/usr/local/cuda/include", "--gpu-architecture=sm_90"))
    k = mod.get_function(name)
    for grid in (132 * 32, (n // 8 + 255) // 256, 132 * 8):
        args = (cp.intp(g.data_ptr()), cp.intp(u.data_ptr()), cp.intp(out.data_ptr()), cp.int64(n))
        us = time_it(lambda: k((grid,), (256,), args))
        err = (out.float() - ref).abs().max().item()
        print(f"{label:<14} grid {grid:>6}: {us:7.1f} us  {nbytes / us / 1e6:6.0f} GB/s  max err {err:.3g}")

fused = torch.compile(lambda a, b: F.gelu(a, approximate="tanh") * b)
us = time_it(lambda: fused(g, u))
print(f"torch.compile gelu*mul: {us:7.1f} us  {nbytes / us / 1e6:6.0f} GB/s (launch included)")
copy_us = time_it(lambda: out.copy_(g))
print(f"copy [8192,3072] bf16: {copy_us:7.1f} us  {2 * n * 2 / copy_us / 1e6:6.0f} GB/s")
