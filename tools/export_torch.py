#!/usr/bin/env python3
"""Exports a torch.nn.Module to mlpc: traces it with torch.fx and writes

  DIR/model.mlp            the graph in mlpc's text form (batch dim symbolic: M)
  DIR/weights.safetensors  its params, named by their state_dict keys (fc1.weight, ...)
  DIR/input.npy            the example input (standard normal, --seed), for `mlpc run --input`

  python3 tools/export_torch.py --module tests/torch/geglu.py:GeGLU --example-shape 4,768 -o DIR

Ops mapped: nn.Linear / F.linear (with and without bias), ReLU, GELU (exact and tanh), SiLU,
sigmoid, tanh, exp, neg, + - * / between tensors, * and / by a constant, LayerNorm and RMSNorm
with weights, Dropout and Identity (inference: identity). Anything else is listed by name and
source location and the export fails: nothing is dropped silently. Works with torch 1.13
(Debian's python3-torch) and 2.x; needs neither numpy nor the safetensors package.
"""

import argparse
import importlib.util
import operator
import os
import re
import sys

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlpc_files import write_npy, write_safetensors  # noqa: E402

MLPC_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
TORCH_DTYPES = {v: k for k, v in MLPC_DTYPES.items()}
NAME_RE = re.compile(r"^[A-Za-z0-9_.]+$")  # what an mlpc %name may hold

UNARY_FUNCTIONS = {
    F.relu: "relu", torch.relu: "relu", F.silu: "silu", torch.sigmoid: "sigmoid",
    torch.tanh: "tanh", torch.exp: "exp", torch.neg: "neg", operator.neg: "neg",
}
if hasattr(F, "sigmoid"):
    UNARY_FUNCTIONS[F.sigmoid] = "sigmoid"
if hasattr(F, "tanh"):
    UNARY_FUNCTIONS[F.tanh] = "tanh"
UNARY_METHODS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "neg": "neg"}
UNARY_MODULES = {nn.ReLU: "relu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh"}
BINARY = {  # callable or method name -> mlpc op
    operator.add: "add", torch.add: "add", "add": "add",
    operator.sub: "sub", torch.sub: "sub", "sub": "sub",
    operator.mul: "mul", torch.mul: "mul", "mul": "mul",
    operator.truediv: "div", torch.div: "div", "div": "div",
}
IDENTITY_MODULES = (nn.Identity, nn.Dropout)  # Dropout: identity at inference (eval mode)
IDENTITY_METHODS = {"contiguous"}


class Unsupported(Exception):
    pass


class UpstreamFailed(Exception):
    """An operand comes from a node that could not be exported (reported there, not again)."""


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


def trace(model):
    """The fx graph of `model`, with a stack trace per node where the torch version records it."""
    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    graph = tracer.trace(model)
    return fx.GraphModule(model, graph)


def source_location(node):
    """'file.py:LINE' of the user code that made `node` (torch 1.13 lists the innermost frame
    first, 2.x last: the frames of torch and of this script are skipped either way)."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', node.stack_trace or "")
    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.abspath(__file__)
    user = [i for i, (f, _, fn) in enumerate(frames)
            if not os.path.abspath(f).startswith(torch_dir) and os.path.abspath(f) != here
            and fn != "<module>"]
    if not user:
        return "unknown location"
    outer = [i for i, (f, _, _) in enumerate(frames) if os.path.abspath(f) == here]
    innermost_first = bool(outer) and outer[0] > user[0]
    f, line, _ = frames[user[0] if innermost_first else user[-1]]
    rel = os.path.relpath(f) if not f.startswith("<") else f
    return f"{f if rel.startswith('..') else rel}:{line}"


def describe(node, gm):
    if node.op == "call_module":
        return f"{type(gm.get_submodule(node.target)).__name__} (module '{node.target}')"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_function":
        name = getattr(node.target, "__name__", str(node.target))
        mod = getattr(node.target, "__module__", None) or ""
        return f"{mod + '.' if mod and mod != 'builtins' and mod != '_operator' else ''}{name}"
    return f"{node.op} {node.target}"


def number(x):
    v = float(x)
    if v != v or v in (float("inf"), float("-inf")):
        raise Unsupported(f"the constant {x!r} is not a finite number")
    return repr(v)


class Exporter:
    def __init__(self, gm, example_shapes, dtype, func_name, shapes):
        self.gm = gm
        self.dtype = MLPC_DTYPES[dtype]
        self.example_shapes = example_shapes
        self.shapes = shapes  # fx node name -> output shape (from ShapeProp)
        self.func_name = func_name
        self.lines = []  # statements of the body
        self.values = {}  # fx node -> mlpc value name, or a Python number for constants
        self.params = {}  # state_dict key -> tensor, in order of first use
        self.taken = set()
        self.problems = []  # (description, location, reason)
        self.state = dict(gm.named_parameters())
        self.state.update(dict(gm.named_buffers()))

    # --- names and types ---------------------------------------------------------------------
    def fresh(self, base):
        name = base
        k = 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def act_type(self, shape):
        dims = ["M"] + [str(d) for d in shape[1:]]
        return f"{self.dtype}[{', '.join(dims)}]"

    def shape_of(self, node):
        return list(self.shapes[node.name])

    def param(self, key):
        """The mlpc value of param `key` (a state_dict key), declared at its first use."""
        if key in self.params:
            return key
        if key not in self.state:
            raise Unsupported(f"'{key}' is not a parameter or buffer of the module")
        if not NAME_RE.match(key):
            raise Unsupported(f"the param name '{key}' has characters mlpc names cannot hold")
        t = self.state[key]
        if t.dtype not in MLPC_DTYPES:
            raise Unsupported(f"param '{key}' has dtype {t.dtype}")
        dims = ", ".join(str(d) for d in t.shape)
        self.lines.append(f"  %{key} = param {MLPC_DTYPES[t.dtype]}[{dims}]")
        self.params[key] = t.detach()
        return key

    def emit(self, node, op, operands, scalar=None, name=None):
        name = self.fresh(name or node.name)
        args = ", ".join(f"%{o}" for o in operands)
        if scalar is not None:
            args += f", {scalar}"
        self.lines.append(f"  %{name} = {op} {args} : {self.act_type(self.shape_of(node))}")
        return name

    # --- operands -------------------------------------------------------------------------------
    def tensor(self, arg):
        if isinstance(arg, fx.Node):
            v = self.values[arg]
            if v is None:
                raise UpstreamFailed()
            if isinstance(v, str):
                return v
        raise Unsupported(f"operand {arg!r} is not a tensor")

    def weight_of(self, arg):
        """A Linear/norm weight given as an fx get_attr node."""
        if isinstance(arg, fx.Node) and arg.op == "get_attr":
            return self.param(arg.target)
        raise Unsupported("its weight is computed, not a parameter of the module")

    def is_row_vector(self, node):
        return isinstance(node, fx.Node) and node.op == "get_attr" and \
            len(self.state[node.target].shape) == 1

    # --- ops --------------------------------------------------------------------------------------
    def linear(self, node, x, weight, bias):
        if bias is None:
            return self.emit(node, "matmul", [x, weight])
        mm = self.fresh(f"{node.name}.mm")
        out_shape = self.shape_of(node)
        self.lines.append(f"  %{mm} = matmul %{x}, %{weight} : {self.act_type(out_shape)}")
        return self.emit(node, "add", [mm, bias])

    def binary(self, node, op, a, b):
        a_const, b_const = not isinstance(a, fx.Node), not isinstance(b, fx.Node)
        if a_const and b_const:
            raise Unsupported("both operands are constants")
        if b_const or a_const:
            c, x = (b, a) if b_const else (a, b)
            x = self.tensor(x)
            if op == "mul":
                return self.emit(node, "scale", [x], number(c))
            if op == "div" and b_const:
                return self.emit(node, "scale", [x], number(1.0 / float(c)))
            if op in ("add", "sub") and b_const:
                return self.emit(node, "add_scalar", [x], number(c if op == "add" else -float(c)))
            if op == "add":
                return self.emit(node, "add_scalar", [x], number(c))
            raise Unsupported(f"{op} with a constant on the left")
        for t in (a, b):  # mlpc broadcasts only a row vector (a bias) over rows
            if self.shape_of(t) != self.shape_of(node) and not self.is_row_vector(t):
                raise Unsupported(f"broadcast of shapes {self.shape_of(a)} and {self.shape_of(b)}")
        return self.emit(node, op, [self.operand(a), self.operand(b)])

    def operand(self, arg):
        if isinstance(arg, fx.Node) and arg.op == "get_attr":
            return self.param(arg.target)
        return self.tensor(arg)

    def gelu(self, node, x, approximate):
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"GELU approximate={approximate!r}")
        return self.emit(node, "gelu" if approximate == "none" else "gelu_tanh", [self.tensor(x)])

    def norm(self, node, kind, x, normalized_shape, weight, bias, eps):
        n = self.shape_of(node)[-1]
        if normalized_shape is not None and list(normalized_shape) != [n]:
            raise Unsupported(f"{kind} over {list(normalized_shape)}: mlpc normalizes the last dim")
        if weight is None or (kind == "layernorm" and bias is None):
            raise Unsupported(f"{kind} without a weight{' and bias' if kind == 'layernorm' else ''}")
        operands = [self.tensor(x), weight] + ([bias] if kind == "layernorm" else [])
        if eps is None:  # nn.RMSNorm(eps=None): torch uses the dtype's machine epsilon
            eps = torch.finfo(TORCH_DTYPES[self.dtype]).eps
        return self.emit(node, kind, operands, number(eps))

    def call_module(self, node):
        mod = self.gm.get_submodule(node.target)
        x = node.args[0] if node.args else None
        if isinstance(mod, nn.Linear):
            w = self.param(f"{node.target}.weight")
            b = self.param(f"{node.target}.bias") if mod.bias is not None else None
            return self.linear(node, self.tensor(x), w, b)
        if isinstance(mod, IDENTITY_MODULES):
            return self.tensor(x)
        if isinstance(mod, nn.GELU):
            return self.gelu(node, x, getattr(mod, "approximate", "none"))
        for cls, op in UNARY_MODULES.items():
            if type(mod) is cls:
                return self.emit(node, op, [self.tensor(x)])
        if isinstance(mod, nn.LayerNorm):
            return self.norm(node, "layernorm", x, mod.normalized_shape,
                             self.param(f"{node.target}.weight") if mod.weight is not None else None,
                             self.param(f"{node.target}.bias")
                             if getattr(mod, "bias", None) is not None else None, mod.eps)
        if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
            return self.norm(node, "rmsnorm", x, mod.normalized_shape,
                             self.param(f"{node.target}.weight") if mod.weight is not None else None,
                             None, mod.eps)
        raise Unsupported("no mlpc op for this module")

    def call_function(self, node):
        f, args, kw = node.target, node.args, node.kwargs
        if f is F.linear:
            x, w = args[0], args[1] if len(args) > 1 else kw["weight"]
            b = args[2] if len(args) > 2 else kw.get("bias")
            return self.linear(node, self.tensor(x), self.weight_of(w),
                               self.weight_of(b) if b is not None else None)
        if f is F.gelu:
            return self.gelu(node, args[0], kw.get("approximate", "none"))
        if f in UNARY_FUNCTIONS:
            if len(args) != 1 or any(k != "inplace" for k in kw):
                raise Unsupported(f"arguments {list(kw)} are not supported")
            return self.emit(node, UNARY_FUNCTIONS[f], [self.tensor(args[0])])
        if f in BINARY:
            if kw or len(args) != 2:
                raise Unsupported(f"extra arguments ({', '.join(kw) or len(args)})")
            return self.binary(node, BINARY[f], args[0], args[1])
        if f is F.layer_norm:
            get = lambda i, k, d=None: args[i] if len(args) > i else kw.get(k, d)  # noqa: E731
            return self.norm(node, "layernorm", args[0], get(1, "normalized_shape"),
                             self.weight_of(get(2, "weight")) if get(2, "weight") is not None
                             else None,
                             self.weight_of(get(3, "bias")) if get(3, "bias") is not None else None,
                             get(4, "eps", 1e-5))
        if hasattr(F, "rms_norm") and f is F.rms_norm:
            get = lambda i, k, d=None: args[i] if len(args) > i else kw.get(k, d)  # noqa: E731
            return self.norm(node, "rmsnorm", args[0], get(1, "normalized_shape"),
                             self.weight_of(get(2, "weight")) if get(2, "weight") is not None
                             else None, None, get(3, "eps"))
        raise Unsupported("no mlpc op for this function")

    def call_method(self, node):
        m, args = node.target, node.args
        if m in IDENTITY_METHODS and len(args) == 1 and not node.kwargs:
            return self.tensor(args[0])
        if m in UNARY_METHODS and len(args) == 1 and not node.kwargs:
            return self.emit(node, UNARY_METHODS[m], [self.tensor(args[0])])
        if m in BINARY and len(args) == 2 and not node.kwargs:
            return self.binary(node, BINARY[m], args[0], args[1])
        raise Unsupported("no mlpc op for this method")

    # --- the whole graph --------------------------------------------------------------------------
    def run(self):
        inputs, outputs = [], []
        self.taken.update(k for k in self.state)  # params keep their state_dict names
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.example_shapes):
            raise SystemExit(f"export_torch.py: error: forward takes {len(placeholders)} "
                             f"input(s), {len(self.example_shapes)} --example-shape given")
        for node in self.gm.graph.nodes:
            try:
                if node.op == "placeholder":
                    name = self.fresh(node.name)
                    inputs.append(f"%{name}: {self.act_type(self.shape_of(node))}")
                    self.values[node] = name
                elif node.op == "get_attr":
                    self.values[node] = node  # resolved where it is used (weight, bias, operand)
                elif node.op == "output":
                    results = node.args[0]
                    results = list(results) if isinstance(results, (tuple, list)) else [results]
                    for r in results:
                        v = self.values.get(r) if isinstance(r, fx.Node) else None
                        if isinstance(r, fx.Node) and r in self.values and v is None:
                            raise UpstreamFailed()
                        if not isinstance(v, str) or v in self.params:
                            raise Unsupported(f"the output {r!r} is not a computed tensor")
                        outputs.append((v, self.act_type(self.shape_of(r))))
                else:
                    self.values[node] = getattr(self, node.op)(node)
            except Unsupported as e:
                self.problems.append((describe(node, self.gm), source_location(node), str(e)))
                self.values[node] = None
            except UpstreamFailed:
                self.values[node] = None
        ret = ", ".join(f"%{v}" for v, _ in outputs)
        ret_types = ", ".join(t for _, t in outputs)
        if len(outputs) > 1:
            ret_types = f"({ret_types})"
        return (f"func @{self.func_name}({', '.join(inputs)}) -> {ret_types} {{\n"
                + "\n".join(self.lines) + f"\n  return {ret}\n}}\n")


def shape_prop(gm, example_inputs):
    """Each node's output shape, from a float32 run on the CPU (shapes do not depend on dtype,
    and torch 1.13 lacks some f16 CPU kernels)."""
    from torch.fx.passes.shape_prop import ShapeProp
    import copy
    gm32 = copy.deepcopy(gm).float().to("cpu")
    ShapeProp(gm32).propagate(*[x.float().cpu() for x in example_inputs])
    shapes = {}
    for n in gm32.graph.nodes:
        tm = n.meta.get("tensor_meta")
        if tm is not None and hasattr(tm, "shape"):
            shapes[n.name] = list(tm.shape)
    return shapes


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
    if len(dtypes) != 1 or next(iter(dtypes)) not in MLPC_DTYPES:
        raise SystemExit(f"export_torch.py: error: the params have dtypes {sorted(map(str, dtypes))}"
                         "; mlpc wants one of f32, f16, bf16 (use --dtype)")
    dtype = next(iter(dtypes))
    try:
        shapes = [[int(d) for d in s.split(",")] for s in args.example_shape]
    except ValueError:
        raise SystemExit(f"export_torch.py: error: --example-shape wants dims like 4,768")
    gen = torch.Generator().manual_seed(args.seed)
    example = [torch.randn(s, generator=gen).to(dtype) for s in shapes]

    gm = trace(model)
    name = re.sub(r"[^A-Za-z0-9_]", "_", args.name or cls.__name__.lower())
    exporter = Exporter(gm, shapes, dtype, name, shape_prop(gm, example))
    text = exporter.run()
    if exporter.problems:
        lines = [f"  {what} at {where}: {why}" for what, where, why in exporter.problems]
        print(f"export_torch.py: error: {len(lines)} op(s) of {args.module} have no mlpc "
              "equivalent; nothing was written:\n" + "\n".join(lines), file=sys.stderr)
        return 1
    unused = sorted(set(dict(model.state_dict())) - set(exporter.params))
    if unused:
        print(f"export_torch.py: note: not used by forward, not exported: {', '.join(unused)}",
              file=sys.stderr)

    os.makedirs(args.out_dir, exist_ok=True)
    header = (f"# Exported from {args.module} by tools/export_torch.py (torch {torch.__version__});"
              f"\n# example input {'; '.join(args.example_shape)}, seed {args.seed}.\n")
    with open(os.path.join(args.out_dir, "model.mlp"), "w") as f:
        f.write(header + text)
    write_safetensors(os.path.join(args.out_dir, "weights.safetensors"), exporter.params)
    for i, x in enumerate(example):
        write_npy(os.path.join(args.out_dir, "input.npy" if i == 0 else f"input{i}.npy"), x)
    print(f"wrote {args.out_dir}/model.mlp, weights.safetensors ({len(exporter.params)} tensors), "
          f"input.npy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
