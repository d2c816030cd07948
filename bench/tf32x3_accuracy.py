#!/usr/bin/env python3
"""Where 3xTF32's error comes from (codegen/tf32x3.h), on the GPU with PyTorch's cuBLAS.

For y = x . w^T (K = 4096, nn.Linear-like scales) it prints max |y - y_fp64| / rms(y_fp64) for:
IEEE fp32; one TF32 product; mlpc's 3xTF32 (one GEMM over 3K); 4xTF32 (lo.lo added); 3xTF32 as
three GEMMs summed in fp32; 3xTF32 with K cut into chunks whose results are summed in fp64. If
the fourth term does not help and chunking does, the error is the tensor cores' accumulation,
not the split. Then, for K = 256, 1024, 4096 and symmetric or GELU-like (mostly positive)
activations, IEEE fp32 against mlpc's chunked 3xTF32 (codegen/tf32x3.h): each chunk's GEMM adds
its product to the previous result through cuBLAS's C (beta = 1), as mlpc's K-chunks do.
Usage: python3 bench/tf32x3_accuracy.py [M K N]
"""
import sys

import torch


def tf32(v):
    """Round to TF32 (10 mantissa bits, to nearest, ties away), as mlpc does."""
    b = v.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    finite = (b & 0x7F800000) != 0x7F800000
    r = (b + 0x1000) & 0xFFFFE000
    r = torch.where((r & 0x7F800000) == 0x7F800000, b & 0xFFFFE000, r)
    r = torch.where(finite, r, b)
    r = torch.where(r >= 2**31, r - 2**32, r)
    return r.to(torch.int32).view(torch.float32)


def problem(m, k, n, dist="sym", seed=0):
    """x [m, k] (symmetric, or what a GELU layer hands the next GEMM: mostly positive), w [n, k]
    at nn.Linear's scale, their TF32 parts, and err(y) = max |y - x.w^T| / rms, against fp64."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dist == "sym":
        x = torch.rand(m, k, device="cuda", generator=g) * 2 - 1
    else:
        x = torch.nn.functional.gelu(torch.randn(m, k, device="cuda", generator=g))
    w = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1) / k**0.5
    ref = x.double() @ w.double().T
    rms = ref.pow(2).mean().sqrt().item()
    err = lambda y: ((y.double() - ref).abs().max().item()) / rms
    xh, wh = tf32(x), tf32(w)
    return x, w, xh, wh, tf32(x - xh), tf32(w - wh), err


def main():
    m, k, n = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 4096, 4096)
    x, w, xh, wh, xl, wl, err = problem(m, k, n)

    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"M={m} K={k} N={n}, max|err| / rms(ref):")
    print(f"  IEEE fp32                    {err(x @ w.T):.3e}")
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"  one TF32 product             {err(x @ w.T):.3e}")
    y3 = torch.cat([xl, xh, xh], 1) @ torch.cat([wh, wl, wh], 1).T
    print(f"  3xTF32, one GEMM over 3K     {err(y3):.3e}")
    y4 = torch.cat([xl, xh, xh, xl], 1) @ torch.cat([wh, wl, wh, wl], 1).T
    print(f"  4xTF32 (lo.lo added)         {err(y4):.3e}")
    ysep = (xl @ wh.T) + (xh @ wl.T) + (xh @ wh.T)
    print(f"  3xTF32, three GEMMs summed   {err(ysep):.3e}")
    for chunks in (4, 16, 64):
        c = k // chunks
        acc = torch.zeros(m, n, dtype=torch.float64, device="cuda")
        for i in range(chunks):
            s = slice(i * c, (i + 1) * c)
            acc += (torch.cat([xl[:, s], xh[:, s], xh[:, s]], 1)
                    @ torch.cat([wh[:, s], wl[:, s], wh[:, s]], 1).T).double()
        print(f"  3xTF32, K in {chunks:2d} chunks (fp64 sum) {err(acc):.3e}")


def chunked(m, k, n, dist):
    """IEEE fp32 vs 3xTF32 in K-chunks chained through C, for chunk lengths up to K."""
    x, w, xh, wh, xl, wl, err = problem(m, k, n, dist, seed=1)
    torch.backends.cuda.matmul.allow_tf32 = False
    line = f"  {dist:4} K={k:4}: IEEE {err(x @ w.T):.2e} | 3xTF32 chunk"
    torch.backends.cuda.matmul.allow_tf32 = True
    for c in (4096, 2048, 1024, 512, 256, 128, 64):
        if c > k:
            continue
        acc = None
        for i in range(k // c):
            s = slice(i * c, (i + 1) * c)
            a = torch.cat([xl[:, s], xh[:, s], xh[:, s]], 1)
            b = torch.cat([wh[:, s], wl[:, s], wh[:, s]], 1).T
            acc = a @ b if acc is None else torch.addmm(acc, a, b)  # C = acc, beta = 1
        line += f" {c}: {err(acc):.2e}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
    print("max|err| / rms(ref), M = N = 4096, chunks chained through C:")
    for dist in ("sym", "gelu"):
        for k in (256, 1024, 4096):
            chunked(4096, k, 4096, dist)
