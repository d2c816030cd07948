#!/usr/bin/env python3
"""Exports a torch.nn.Module to mlpc: traces it with torch.fx and writes

  DIR/model.mlp            the graph in mlpc's text form (batch dim symbolic: M)
  DIR/weights.safetensors  its params, named by their state_dict keys (fc1.weight, ...)
  DIR/input.npy            the example input (standard normal, --seed), for `mlpc run --input`

  python3 tools/export_torch.py --module tests/torch/geglu.py:GeGLU --example-shape 4,768 -o DIR

The translation is the mlpc package's (python/mlpc/_fx.py: the ops it maps are listed there);
this tool needs only its pure-Python part, not the extension. Anything unmapped is listed by name
and source location and the export fails: nothing is dropped silently. Works with torch 1.13
(Debian's python3-torch) and 2.x; needs neither numpy nor the safetensors package.
"""

import argparse
import importlib.util
import os
import re
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(1, os.path.join(os.path.dirname(here), "python"))  # a plain checkout's mlpc
from mlpc_files import write_npy, write_safetensors  # noqa: E402
from mlpc import _fx  # noqa: E402

MLPC_DTYPES, TORCH_DTYPES, trace = _fx.MLPC_DTYPES, _fx.TORCH_DTYPES, _fx.trace  # for compare_torch.py


def load_module_class(spec):
    path, sep, cls_name = spec.rpartition(":")
    if not sep or not path or not cls_name:
        raise SystemExit(f"export_torch.py: error: --module wants FILE.py:ClassName, got {spec!r}")
    mod_spec = importlib.util.spec_from_file_location(
        os.path.splitext(os.path.basename(path))[0], path)
    if mod_spec is None or not os.path.isfile(path):
        raise SystemExit(f"export_torch.py: error: cannot load {path}")
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    if not hasattr(mod, cls_name):
        raise SystemExit(f"export_torch.py: error: {path} has no class {cls_name}")
    return getattr(mod, cls_name)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--module", required=True, help="FILE.py:ClassName (constructed with no args)")
    p.add_argument("--example-shape", action="append", required=True,
                   help="shape of an input, batch first, e.g. 4,768 (once per forward argument)")
    p.add_argument("-o", "--out-dir", required=True)
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPES), help="cast the module (default: its own)")
    p.add_argument("--seed", type=int, default=0, help="torch seed for the init and the input")
    p.add_argument("--name", help="the mlpc function name (default: the class name, lowercased)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cls = load_module_class(args.module)
    torch.manual_seed(args.seed)
    model = cls().eval()
    if args.dtype:
        model = model.to(TORCH_DTYPES[args.dtype])
    dtypes = {p.dtype for p in model.parameters()} or {torch.float32}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _fx.MLPC_DTYPES:
        raise SystemExit(f"export_torch.py: error: the params have dtypes {sorted(map(str, dtypes))}"
                         "; mlpc wants one of f32, f16, bf16 (use --dtype)")
    dtype = next(iter(dtypes))
    try:
        shapes = [[int(d) for d in s.split(",")] for s in args.example_shape]
    except ValueError:
        raise SystemExit(f"export_torch.py: error: --example-shape wants dims like 4,768")
    gen = torch.Generator().manual_seed(args.seed)
    example = [torch.randn(s, generator=gen).to(dtype) for s in shapes]

    gm = _fx.trace(model)
    name = re.sub(r"[^A-Za-z0-9_]", "_", args.name or cls.__name__.lower())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(shapes):
        raise SystemExit(f"export_torch.py: error: forward takes {len(placeholders)} "
                         f"input(s), {len(shapes)} --example-shape given")
    exported = _fx.translate(gm, example, name)
    if exported.problems:
        lines = exported.problem_lines()
        print(f"export_torch.py: error: {len(lines)} op(s) of {args.module} have no mlpc "
              "equivalent; nothing was written:\n" + "\n".join(lines), file=sys.stderr)
        return 1
    unused = sorted(set(dict(model.state_dict())) - set(exported.sources.values()))
    if unused:
        print(f"export_torch.py: note: not used by forward, not exported: {', '.join(unused)}",
              file=sys.stderr)

    os.makedirs(args.out_dir, exist_ok=True)
    header = (f"# Exported from {args.module} by tools/export_torch.py (torch {torch.__version__});"
              f"\n# example input {'; '.join(args.example_shape)}, seed {args.seed}.\n")
    with open(os.path.join(args.out_dir, "model.mlp"), "w") as f:
        f.write(header + exported.text)
    write_safetensors(os.path.join(args.out_dir, "weights.safetensors"), exported.params)
    inputs = ["input.npy" if i == 0 else f"input{i}.npy" for i in range(len(example))]
    for name, x in zip(inputs, example):
        write_npy(os.path.join(args.out_dir, name), x)
    print(f"wrote {args.out_dir}/model.mlp, weights.safetensors ({len(exported.params)} tensors), "
          f"{', '.join(inputs)} (the inputs, in order: mlpc run --input {' '.join(inputs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
