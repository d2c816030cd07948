#!/usr/bin/env python3
"""Compares mlpc's output with PyTorch's, on the same weights and input:

  python3 tools/compare_torch.py --module tests/torch/geglu.py:GeGLU \\
      --weights DIR/weights.safetensors --input DIR/input.npy [DIR/input1.npy ...] --output y.npy
      [--dtype bf16]

Runs the module in PyTorch (--device cpu or cuda) in the dtype mlpc ran (default: the weights'),
and in float64 on the CPU from the same rounded weights and input: the exact answer both are
judged by. The tolerance is mlpc's own (runtime/reference/tolerance.h), for the module's dtype,
longest GEMM reduction K and longest op chain:

  |got - ref64| <= atol + rtol |ref64|,  rtol = max(torch.testing's rtol, depth u),
                                         atol = (8 u + 4 sqrt(K) 2^-24) rms(ref64)

(For f32 GEMMs run as 3xTF32, `tolerance(..., tf32x3=True)`: 4 sqrt(3K) 2^-21 in place of
4 sqrt(K) 2^-24, as mlpc's own check allows.)

mlpc must be within it of the float64 answer (its own contract), and within twice it of
PyTorch's result (PyTorch in the same dtype makes errors of the same kinds and size: fp32
accumulation over K, one rounding per stored intermediate). Prints one line per check; exits 0
when both hold, 1 otherwise.
"""

import argparse
import math
import os
import sys

import torch
import torch.fx as fx
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_torch import TORCH_DTYPES, MLPC_DTYPES, load_module_class, trace  # noqa: E402
from mlpc_files import read_npy, read_safetensors  # noqa: E402

# torch.testing's default rtol and the unit roundoff u, per dtype (runtime/reference/tolerance.cpp).
RTOL_AND_U = {torch.float32: (1.3e-6, 2.0**-24), torch.float16: (1e-3, 2.0**-11),
              torch.bfloat16: (1.6e-2, 2.0**-8)}


def chain_depth(gm):
    """Ops on the longest path from an input, counted as mlpc counts them (a Linear with bias is
    a matmul and an add; identities count nothing)."""
    depth = {}
    for n in gm.graph.nodes:
        ins = [depth.get(a, 0) for a in n.all_input_nodes]
        d = max(ins, default=0)
        if n.op == "call_module":
            mod = gm.get_submodule(n.target)
            if isinstance(mod, (nn.Identity, nn.Dropout)):
                cost = 0
            elif isinstance(mod, nn.Linear) and mod.bias is not None:
                cost = 2
            else:
                cost = 1
        elif n.op in ("call_function", "call_method"):
            cost = 1
        else:
            cost = 0
        depth[n] = d + cost
    return max(depth.values(), default=1)


def max_k(weights):
    """The longest GEMM reduction: the in-features of the widest rank-2 weight."""
    return max((t.shape[-1] for t in weights.values() if t.dim() == 2), default=0)


def tolerance(model, dtype, weights=None, tf32x3=False):
    """(rtol, atol floor, depth, K): mlpc's contract for `model`'s output in `dtype`, from its
    longest op chain (depth) and its longest GEMM reduction K (over `weights`, default the
    model's own); `tf32x3`: f32 GEMMs may run as 3xTF32, which the contract allows more."""
    rtol_torch, u = RTOL_AND_U[dtype]
    depth = chain_depth(trace(model))
    k = max_k(model.state_dict() if weights is None else weights)
    if tf32x3 and dtype == torch.float32:
        accumulate = 4 * math.sqrt(3 * k) * 2.0**-21
    else:
        accumulate = 4 * math.sqrt(k) * 2.0**-24
    return max(rtol_torch, depth * u), 8 * u + accumulate, depth, k


def compare(got, ref, rtol, floor):
    """(worst |got-ref| / (atol + rtol |ref|), max |got-ref|); NaN never passes."""
    err = (got - ref).abs()
    atol = floor * ref.pow(2).mean().sqrt().item()
    allowed = atol + rtol * ref.abs()
    if torch.isnan(got).any():
        return math.inf, math.nan
    return (err / allowed).max().item(), err.max().item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--module", required=True, help="FILE.py:ClassName, as exported")
    p.add_argument("--weights", required=True, help="the weights.safetensors mlpc ran with")
    p.add_argument("--input", required=True, nargs="+",
                   help="the .npy inputs mlpc ran on, in the module's argument order")
    p.add_argument("--output", required=True, help="mlpc's --output .npy")
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), help="default: the weights' dtype")
    p.add_argument("--device", default="cpu", help="where PyTorch runs: cpu or cuda")
    args = p.parse_args(argv)

    weights = read_safetensors(args.weights)
    dtype = TORCH_DTYPES[args.dtype] if args.dtype else next(iter(weights.values())).dtype
    model = load_module_class(args.module)().eval().to(dtype)
    missing_in_module = set(weights) - set(model.state_dict())
    if missing_in_module:
        raise SystemExit(f"compare_torch.py: error: {args.weights} has tensors the module lacks: "
                         f"{sorted(missing_in_module)}")
    model.load_state_dict(weights, strict=False)  # rounds to `dtype` as mlpc does (nearest even)
    xs = [read_npy(path).to(dtype) for path in args.input]
    n_args = sum(1 for n in trace(model).graph.nodes if n.op == "placeholder")
    if len(xs) != n_args:
        raise SystemExit(f"compare_torch.py: error: {args.module} takes {n_args} input(s), "
                         f"{len(xs)} --input file(s) given")
    x = xs[0]
    got = read_npy(args.output).double()

    with torch.no_grad():
        mine = model.to(args.device)(*[t.to(args.device) for t in xs]).double().cpu()
        ref = model.to("cpu").double()(*[t.double() for t in xs])
    if got.shape != ref.shape:
        print(f"FAIL: mlpc's output has shape {list(got.shape)}, PyTorch's {list(ref.shape)}")
        return 1

    rtol, floor, depth, k = tolerance(model, dtype, weights)
    r_ref, e_ref = compare(got, ref, rtol, floor)
    r_torch, e_torch = compare(got, mine, 2 * rtol, 2 * floor)
    r_t64, e_t64 = compare(mine, ref, rtol, floor)
    tag = f"{MLPC_DTYPES[dtype]}, batch {x.shape[0]}, K {k}, depth {depth}, PyTorch {torch.__version__} on {args.device}"
    print(f"tolerance ({tag}): rtol {rtol:.3g}, atol {floor:.3g} * rms(ref)")
    print(f"mlpc    vs float64 : max_abs_err {e_ref:.3g}, {r_ref:.3f} of the tolerance")
    print(f"PyTorch vs float64 : max_abs_err {e_t64:.3g}, {r_t64:.3f} of the tolerance (info)")
    print(f"mlpc    vs PyTorch : max_abs_err {e_torch:.3g}, {r_torch:.3f} of twice the tolerance")
    ok = r_ref <= 1 and r_torch <= 1
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
