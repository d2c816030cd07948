#!/usr/bin/env python3
"""Times shapes of the gelu_tanh(gate) * up kernel on bf16 [8192, 3072] (the article's fused
kernel) with CuPy, next to torch.compile's Triton kernel and a device copy on the same tensors,
all in one run: GPU time per launch (CUDA events, best of 3 rounds of 100) and effective
bandwidth (2 reads + 1 write). It answers what mlpc's generator should emit: how many 16-byte
vectors per thread, a capped grid-stride loop or one pass, cache hints, block size.
Usage: python3 bench/pointwise_variants.py"""
import itertools
import cupy as cp
import torch
import torch.nn.functional as F

M, N = 8192, 3072
n = M * N
g = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
u = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
out = torch.empty_like(g)
nbytes = 3 * n * 2
SMS = torch.cuda.get_device_properties(0).multi_processor_count

TEMPLATE = r"""
#include <cuda_bf16.h>
__device__ __forceinline__ float gelu_mul(float x, float y) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + TANH(inner)) * y;
}
__device__ __forceinline__ uint4 LOAD(const uint4* p) { return LOADEXPR; }
__device__ __forceinline__ void STORE(uint4* p, uint4 v) { STOREEXPR; }
extern "C" __global__ void __launch_bounds__(BLOCK) k(const __nv_bfloat16* __restrict__ a,
    const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ o, long long n) {
  const uint4* A = reinterpret_cast<const uint4*>(a);
  const uint4* B = reinterpret_cast<const uint4*>(b);
  uint4* O = reinterpret_cast<uint4*>(o);
  const long long nv = n / 8;
  const long long stride = (long long)gridDim.x * blockDim.x * UNROLL;
  for (long long base = (long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x; base < nv;
       base += stride) {
    uint4 ra[UNROLL], rb[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long v = base + (long long)u * blockDim.x;
      if (v < nv) { ra[u] = LOAD(A + v); rb[u] = LOAD(B + v); }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long v = base + (long long)u * blockDim.x;
      if (v < nv) {
        const __nv_bfloat16* ea = reinterpret_cast<const __nv_bfloat16*>(&ra[u]);
        const __nv_bfloat16* eb = reinterpret_cast<const __nv_bfloat16*>(&rb[u]);
        uint4 r;
        __nv_bfloat16* er = reinterpret_cast<__nv_bfloat16*>(&r);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          er[j] = __float2bfloat16_rn(gelu_mul(__bfloat162float(ea[j]), __bfloat162float(eb[j])));
        STORE(O + v, r);
      }
    }
  }
}
"""

APPROX_TANH = r"""
__device__ __forceinline__ float tanh_approx(float x) {
  float y; asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
"""

def source(block, unroll, hints, tanh):
    s = TEMPLATE.replace("BLOCK", str(block)).replace("UNROLL", str(unroll))
    s = s.replace("TANH", "tanh_approx" if tanh == "approx" else "tanhf")
    if hints == "cs":
        s = s.replace("LOADEXPR", "__ldcs(p)").replace("STOREEXPR", "__stcs(p, v)")
    elif hints == "nc":
        s = s.replace("LOADEXPR", "__ldg(p)").replace("STOREEXPR", "__stcs(p, v)")
    else:
        s = s.replace("LOADEXPR", "*p").replace("STOREEXPR", "*p = v")
    if tanh == "approx":
        s = s.replace("#include <cuda_bf16.h>", "#include <cuda_bf16.h>\n" + APPROX_TANH)
    return s

def time_it(fn, reps=100, rounds=3):
    fn(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        s, e = torch.cuda.Event(True), torch.cuda.Event(True)
        s.record()
        for _ in range(reps): fn()
        e.record(); torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) * 1e3 / reps)
    return best

ref = F.gelu(g.float(), approximate="tanh") * u.float()
copy_us = time_it(lambda: out.copy_(g))
print(f"copy [8192,3072] bf16: {copy_us:7.1f} us  {2 * n * 2 / copy_us / 1e3:6.0f} GB/s")
fused = torch.compile(lambda a, b: F.gelu(a, approximate="tanh") * b)
fused(g, u)
tc_us = time_it(lambda: fused(g, u))
print(f"torch.compile gelu*mul (launch included): {tc_us:7.1f} us  {nbytes / tc_us / 1e3:6.0f} GB/s")
# The Triton kernel's own GPU time, from the profiler (no Python or launch overhead).
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(50):
        fused(g, u)
    torch.cuda.synchronize()
for ev in prof.key_averages():
    if "triton" in ev.key:
        dev_us = getattr(ev, "device_time", None) or getattr(ev, "cuda_time", 0)
        print(f"  Triton kernel {ev.key}: {dev_us:7.1f} us  {nbytes / dev_us / 1e3:6.0f} GB/s")

rows = []
for block, unroll, hints, tanh, grid_mode in itertools.product(
        (256, 512), (1, 2, 4), ("none", "cs"), ("tanhf", "approx"), ("capped", "one-pass")):
    if tanh == "approx" and (hints != "none" or block != 256):
        continue
    mod = cp.RawModule(code=source(block, unroll, hints, tanh),
                       options=("-std=c++17", "-I/usr/local/cuda/include", "--gpu-architecture=sm_90"))
    k = mod.get_function("k")
    per_block = block * unroll * 8
    grid = (n + per_block - 1) // per_block
    if grid_mode == "capped":
        grid = min(grid, SMS * 32 * 256 // block)
    args = (cp.intp(g.data_ptr()), cp.intp(u.data_ptr()), cp.intp(out.data_ptr()), cp.int64(n))
    us = time_it(lambda: k((grid,), (block,), args))
    err = (out.float() - ref).abs().max().item()
    rows.append((us, block, unroll, hints, tanh, grid_mode, grid, err))
for us, block, unroll, hints, tanh, grid_mode, grid, err in sorted(rows):
    print(f"block {block:4} unroll {unroll} hints {hints:4} {tanh:6} {grid_mode:8} grid {grid:6}: "
          f"{us:7.1f} us {nbytes / us / 1e3:6.0f} GB/s  max err {err:.3g}")
copy_us = time_it(lambda: out.copy_(g))
print(f"copy again: {copy_us:7.1f} us  {2 * n * 2 / copy_us / 1e3:6.0f} GB/s")
