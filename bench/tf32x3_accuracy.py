#!/usr/bin/env python3
"""Where 3xTF32's error comes from (codegen/tf32x3.h), on the GPU with PyTorch's cuBLAS.

For y = x . w^T (K = 4096, nn.Linear-like scales) it prints max |y - y_fp64| / rms(y_fp64) for:
IEEE fp32; one TF32 product; mlpc's 3xTF32 (one GEMM over 3K); 4xTF32 (lo.lo added); 3xTF32 as
three GEMMs summed in fp32; 3xTF32 with K cut into chunks whose results are summed in fp64. If
the fourth term does not help and chunking does, the error is the tensor cores' accumulation,
not the split. Usage: python3 bench/tf32x3_accuracy.py [M K N]
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


def main():
    m, k, n = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 4096, 4096)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(m, k, device="cuda", generator=g) * 2 - 1
    w = (torch.rand(n, k, device="cuda", generator=g) * 2 - 1) / k**0.5
    ref = x.double() @ w.double().T
    rms = ref.pow(2).mean().sqrt().item()
    err = lambda y: ((y.double() - ref).abs().max().item()) / rms
    xh, wh = tf32(x), tf32(w)
    xl, wl = tf32(x - xh), tf32(w - wh)

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


if __name__ == "__main__":
    main()
