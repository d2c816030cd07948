"""torch.fx graph -> mlpc's text form, in pure Python (no extension needed), so mlpc.compile, the
torch.compile backend and tools/export_torch.py share one translation and CPU tests can check it.
Leading dims of every activation are mlpc's batch dim M; ops act on the last dim."""

import math
import operator
import os
import re

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

MLPC_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
TORCH_DTYPES = {v: k for k, v in MLPC_DTYPES.items()}
NAME_RE = re.compile(r"^[A-Za-z0-9_.]+$")  # what an mlpc %name may hold


def _fns(*names, mod=F):
    return [getattr(mod, n) for n in names if hasattr(mod, n)]


UNARY = {}  # function or method name -> mlpc op
for _op, _fs in {"relu": _fns("relu") + [torch.relu], "silu": _fns("silu"),
                 "sigmoid": _fns("sigmoid") + [torch.sigmoid], "tanh": _fns("tanh") + [torch.tanh],
                 "exp": [torch.exp], "neg": [torch.neg, operator.neg], "rsqrt": [torch.rsqrt],
                 "sqrt": [torch.sqrt], "square": [torch.square]}.items():
    UNARY.update({f: _op for f in _fs})
    UNARY[_op] = _op
UNARY_MODULES = {nn.ReLU: "relu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh"}
BINARY = {operator.add: "add", torch.add: "add", "add": "add", operator.iadd: "add",
          operator.sub: "sub", torch.sub: "sub", "sub": "sub",
          operator.mul: "mul", torch.mul: "mul", "mul": "mul", operator.imul: "mul",
          operator.truediv: "div", torch.div: "div", "div": "div"}
POW = {operator.pow, torch.pow, "pow"}
REDUCE = {torch.mean: "reduce_mean", "mean": "reduce_mean", torch.sum: "reduce_sum",
          "sum": "reduce_sum", torch.amax: "reduce_max", "amax": "reduce_max"}
SOFTMAX = set(_fns("softmax")) | {torch.softmax, "softmax"}
LINEAR = set(_fns("linear"))
MATMUL = {torch.matmul, operator.matmul, torch.mm, "matmul", "mm"}
IDENTITY_MODULES = (nn.Identity, nn.Dropout)  # Dropout: identity at inference (eval mode)
IDENTITY_METHODS = {"contiguous", "clone", "detach"}
CAST_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}
SHAPE_METHODS = {"size", "dim"}  # results are shapes (Meta), used only by view/reshape
RESHAPES = {"view", "reshape", torch.reshape}
DROPOUT = set(_fns("dropout")) | {torch.dropout}


class Unsupported(Exception):
    pass


class UpstreamFailed(Exception):
    """An operand comes from a node that could not be translated (reported there, not again)."""


class Value:
    """An mlpc value: its name, dtype ("bf16"), trailing dims, and whether dim 0 is the batch M."""
    __slots__ = ("name", "dtype", "dims", "batched")

    def __init__(self, name, dtype, dims, batched=True):
        self.name, self.dtype, self.dims, self.batched = name, dtype, tuple(dims), batched

    def type(self):
        d = (["M"] if self.batched else []) + [str(x) for x in self.dims]
        return f"{self.dtype}[{', '.join(d)}]"


class Meta:
    """A non-tensor value (a size, a shape tuple, a SymInt, a tensor's dtype, a number): view,
    reshape and .to() take it, and a scalar op takes its value where it is a known number."""
    __slots__ = ("dtype", "value")

    def __init__(self, dtype=None, value=None):
        self.dtype, self.value = dtype, value


# Arithmetic on numbers that Dynamo lifts into the graph under dynamic=True (math.pi, an eps).
SCALAR_OPS = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
              operator.truediv: operator.truediv, operator.pow: operator.pow,
              operator.neg: operator.neg, math.sqrt: math.sqrt}
if hasattr(torch, "_sym_sqrt"):
    SCALAR_OPS[torch._sym_sqrt] = math.sqrt


class ParamRef:
    """A module tensor not yet declared: declared as an mlpc param at its first use."""
    __slots__ = ("key", "tensor")

    def __init__(self, key, tensor):
        self.key, self.tensor = key, tensor


class Translation:
    """What translate() returns. params: mlpc name -> tensor laid out as mlpc reads it
    (a Conv1D weight is a transposed view); sources: mlpc name -> the module's key."""

    def __init__(self, text, inputs, outputs, params, sources, problems, scalars):
        self.text, self.inputs, self.outputs = text, inputs, outputs
        self.params, self.sources, self.problems = params, sources, problems
        self.scalars = scalars  # [(placeholder, value)]: 0-d inputs whose value the text holds

    def problem_lines(self):
        return [f"  {what} at {where}: {why}" for what, where, why, _ in self.problems]


def trace(model):
    """The fx graph of `model`, with a stack trace per node where the torch version records it."""
    tracer = fx.Tracer()
    tracer.record_stack_traces = True
    graph = tracer.trace(model)
    return fx.GraphModule(model, graph)


_SKIP_DIRS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)))


def source_location(node):
    """'file.py:LINE' of the user code that made `node` (torch 1.13 lists the innermost frame
    first, 2.x last: frames of torch, of mlpc and of the calling tool are skipped either way)."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', node.stack_trace or "")
    user = [(f, ln) for f, ln, fn in frames
            if not os.path.abspath(f).startswith(_SKIP_DIRS) and fn != "<module>"
            and not os.path.basename(f).startswith("export_torch")]
    if not user:
        return "unknown location"
    innermost_first = int(torch.__version__.split(".")[0]) < 2
    f, line = user[0] if innermost_first else user[-1]
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
        return f"{mod + '.' if mod and mod not in ('builtins', '_operator') else ''}{name}"
    return f"{node.op} {node.target}"


def number(x):
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise Unsupported(f"{x!r} is not a constant number")
    v = float(x)
    if not math.isfinite(v):
        raise Unsupported(f"the constant {x!r} is not a finite number")
    return repr(v)


def _promote(a, b):
    return a if a == b else "f32"  # f16 with bf16 promotes to f32 in torch too


def node_shapes(gm, example_inputs):
    """fx node -> (shape with None for symbolic dims, torch dtype) for tensor results, None for
    others. From Dynamo's fake-tensor metadata where every node has it, else from a float32
    ShapeProp run (on the GPU where the inputs are; on the CPU in float32, since torch 1.13 lacks
    some f16 CPU kernels: translate tracks dtypes itself)."""
    def dim(d):  # a SymInt that guards made constant counts as its value
        return d if isinstance(d, int) else getattr(getattr(d, "node", None), "maybe_as_int",
                                                    lambda: None)()

    def of(v):
        if isinstance(v, torch.Tensor):
            return [dim(d) for d in v.shape], v.dtype
        return None
    nodes = list(gm.graph.nodes)
    metas = [n.meta.get("example_value", n.meta.get("val", KeyError)) for n in nodes
             if n.op != "output"]
    if metas and all(m is not KeyError for m in metas):
        return {n: of(n.meta.get("example_value", n.meta.get("val"))) for n in nodes
                if n.op != "output"}
    import copy
    from torch.fx.passes.shape_prop import ShapeProp
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    with torch.no_grad():
        if tensors and all(x.device.type != "cpu" for x in tensors):
            run, args = gm, example_inputs  # on the GPU as it is: no copy of the weights
        else:
            run = copy.deepcopy(gm).float()
            args = [x.detach().float() if isinstance(x, torch.Tensor) else x
                    for x in example_inputs]
        ShapeProp(run).propagate(*args)
    out = {}
    for n, nr in zip(nodes, run.graph.nodes):
        tm = nr.meta.get("tensor_meta")
        out[n] = (list(tm.shape), tm.dtype) if hasattr(tm, "shape") else None
    return out


def prettify_param(name):
    """Dynamo's placeholder for self.mlp.c_fc.weight, l_self_modules_mlp_modules_c_fc_parameters_
    weight_, back to mlp.c_fc.weight."""
    m = re.match(r"^[lL]_self_(.*?)_?$", name)
    if not m:
        return name
    s = re.sub(r"^modules_", "", m.group(1))
    return re.sub(r"_(modules|parameters|buffers)_", ".", s)


class Translator:
    """Walks an fx graph once. With probe=True every tensor operand counts as an input, so each
    node is judged on its own: the partitioner's question "does mlpc take this node?"."""

    def __init__(self, gm, shapes, example_inputs, func_name="f", param_placeholders=None,
                 probe=False):
        self.gm, self.shapes, self.func_name, self.probe = gm, shapes, func_name, probe
        self.example_inputs = list(example_inputs)
        self.param_placeholders = param_placeholders or {}  # placeholder name -> (key, tensor)
        self.lines, self.values, self.params, self.sources = [], {}, {}, {}
        self.declared = {}  # (module key, transposed) -> Value
        self.taken, self.problems = set(), []
        self.state = dict(gm.named_parameters())
        self.state.update(dict(gm.named_buffers()))
        self.supported = set()
        self.computing = set()  # supported nodes that emit mlpc ops (not views, sizes, identities)
        self.reserved = set(self.state) | {k for k, _ in self.param_placeholders.values()}

    # --- names and values ------------------------------------------------------------------------
    def fresh(self, base):
        base = re.sub(r"[^A-Za-z0-9_.]", "_", base)
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def shape(self, node):
        s = self.shapes.get(node) if isinstance(node, fx.Node) else None
        return s[0] if s else None

    def is_tensor(self, node):
        return isinstance(node, fx.Node) and bool(self.shapes.get(node))

    def declare_param(self, ref, transpose=False):
        """The Value of module tensor `ref` (transposed: a Conv1D weight stored [in, out]),
        declared as an mlpc param at its first use."""
        key = (ref.key, transpose)
        if key in self.declared:
            return self.declared[key]
        t = ref.tensor.detach()
        if t.dtype not in MLPC_DTYPES:
            raise Unsupported(f"param '{ref.key}' has dtype {t.dtype}")
        if transpose:
            if t.dim() != 2:
                raise Unsupported(f"param '{ref.key}' is not a matrix")
            t = t.t()
        keep = not transpose and ref.key in self.reserved and ref.key not in self.params
        name = ref.key if keep else self.fresh(ref.key + ("_t" if transpose else ""))
        v = Value(name, MLPC_DTYPES[t.dtype], t.shape, batched=False)
        self.lines.append(f"  %{name} = param {v.type()}")
        self.params[name], self.sources[name] = t, ref.key
        self.declared[key] = v
        return v

    def val(self, arg):
        """The mlpc Value of a tensor operand (a param is declared at its first use)."""
        if isinstance(arg, (fx.Node, _Key)):
            v = self.values.get(arg)
            if v is None and arg in self.values:
                raise UpstreamFailed()
            if isinstance(v, ParamRef):
                return self.declare_param(v)
            if isinstance(v, Value):
                return v
        raise Unsupported(f"operand {arg!r} is not a tensor")

    def emit(self, node, op, operands, scalar=None, dtype=None, dims=None, name=None):
        """Appends `%name = op operands[, scalar] : type` and returns its Value; the result has
        the first operand's dtype and batching unless told."""
        batched = any(o.batched for o in operands)
        if dims is None:
            s = self.shape(node)
            dims = (s[-1],) if s else operands[0].dims[-1:]
        v = Value(self.fresh(name or node.name), dtype or operands[0].dtype, dims, batched)
        args = ", ".join(f"%{o.name}" for o in operands)
        if scalar is not None:
            args += f", {scalar}"
        self.lines.append(f"  %{v.name} = {op} {args} : {v.type()}")
        return v

    def cast(self, node, v, dtype, name=None):
        if v.dtype == dtype:
            return v
        return self.emit(node, "cast", [v], dtype=dtype, dims=v.dims,
                         name=name or f"{v.name}.{dtype}")

    # --- ops ---------------------------------------------------------------------------------------
    def linear(self, node, x, w, b, transposed=False):
        """x @ w^T (+ b); `transposed`: w is stored [in, out] (Conv1D, x @ w)."""
        x = self.val(x)
        if not isinstance(self.values.get(w), ParamRef):
            raise Unsupported("its weight is computed, not a parameter of the module")
        w = self.declare_param(self.values[w], transpose=transposed)
        if len(w.dims) != 2 or w.dims[1] != x.dims[-1]:
            raise Unsupported(f"weight of shape {list(w.dims)} for an input of {x.dims[-1]}")
        if b is None:
            return self.emit(node, "matmul", [x, w], dims=(w.dims[0],))
        mm = self.emit(node, "matmul", [x, w], dims=(w.dims[0],), name=f"{node.name}.mm")
        return self.binary(node, "add", mm, self.val(b))

    def binary(self, node, op, a, b):
        """a op b for Values or Python numbers; mlpc broadcasts a row vector [N] and a per-row
        value [M, 1] over [M, N]."""
        a_num, b_num = not isinstance(a, Value), not isinstance(b, Value)
        if a_num and b_num:
            raise Unsupported("both operands are constants")
        if a_num or b_num:
            c, x = (b, a) if b_num else (a, b)
            c = float(c)
            if op == "mul":
                return x if c == 1.0 else self.emit(node, "scale", [x], number(c))
            if op == "div" and b_num:
                return self.emit(node, "scale", [x], number(1.0 / c))
            if op == "add" or (op == "sub" and b_num):
                return self.emit(node, "add_scalar", [x], number(c if op == "add" else -c))
            if op == "sub":  # c - x
                return self.emit(node, "add_scalar", [self.emit(node, "neg", [x],
                                                                 name=f"{node.name}.neg")],
                                 number(c))
            raise Unsupported(f"{op} with a constant on the left")
        dims = self.broadcast(a, b)
        dtype = _promote(a.dtype, b.dtype)
        return self.emit(node, op, [self.cast(node, a, dtype), self.cast(node, b, dtype)], dims=dims)

    @staticmethod
    def broadcast(a, b):
        """The result dims of a op b: mlpc broadcasts a row vector param [N] and a per-row value
        [M, 1] over [M, N]."""
        if a.batched and b.batched:
            if a.dims == b.dims or b.dims == (1,):
                return a.dims
            if a.dims == (1,):
                return b.dims
        elif a.batched and b.dims == a.dims[-1:]:
            return a.dims
        elif b.batched and a.dims == b.dims[-1:]:
            return b.dims
        raise Unsupported(f"broadcast of {a.type()} and {b.type()}")

    def number_or_val(self, arg):
        arg = self.scalar(arg)
        if isinstance(arg, (int, float)) and not isinstance(arg, bool):
            return arg
        if isinstance(arg, fx.Node) and isinstance(self.values.get(arg), Meta):
            raise Unsupported("an operand is a size, not a tensor")
        return self.val(arg)

    def meta(self, node):
        """A non-tensor result, with its value where it is arithmetic on known numbers."""
        if node.op == "call_method" and node.target == "item":
            return Meta(value=getattr(self.values.get(node.args[0]), "value", None))
        f = SCALAR_OPS.get(node.target) if node.op == "call_function" else None
        if f is None or node.kwargs:
            return Meta()
        vals = [getattr(self.values.get(a), "value", None) if isinstance(a, fx.Node) else a
                for a in node.args]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return Meta(value=f(*vals))
        return Meta()

    def scalar(self, arg):
        """A number argument, also where Dynamo passes it as a graph value (dynamic=True)."""
        if isinstance(arg, fx.Node) and isinstance(self.values.get(arg), Meta):
            return self.values[arg].value if self.values[arg].value is not None else arg
        return arg

    def power(self, node, x, e):
        x, e = self.val(x), self.scalar(e)
        if not isinstance(e, (int, float)) or isinstance(e, bool):
            raise Unsupported("the exponent is a tensor")
        if e == 1:
            return x
        if e == 2:
            return self.emit(node, "square", [x])
        if e == 3:
            sq = self.emit(node, "square", [x], name=f"{node.name}.sq")
            return self.emit(node, "mul", [sq, x])
        if e == 0.5:
            return self.emit(node, "sqrt", [x])
        if e == -0.5:
            return self.emit(node, "rsqrt", [x])
        raise Unsupported(f"pow with exponent {e!r} (mlpc has 1, 2, 3, 0.5, -0.5)")

    def last_dim(self, node, dim):
        s = self.shape(node.args[0]) or []
        if dim is None or (isinstance(dim, (list, tuple)) and len(dim) != 1):
            raise Unsupported(f"dim={dim!r}: mlpc reduces over the last dim only")
        d = dim[0] if isinstance(dim, (list, tuple)) else dim
        if d not in (-1, len(s) - 1):
            raise Unsupported(f"dim={dim!r}: mlpc reduces over the last dim only")

    def reduce(self, node, op, x, dim, keepdim, dtype=None):
        self.last_dim(node, dim)
        if not keepdim:
            raise Unsupported("keepdim=False: mlpc keeps the reduced dim as 1")
        v = self.val(x)
        if dtype is not None:
            v = self.cast(node, v, self.mlpc_dtype(dtype))
        return self.emit(node, op, [v], dims=(1,))

    def softmax(self, node, x, dim, dtype=None):
        self.last_dim(node, dim)
        v = self.val(x)
        if dtype is not None:
            v = self.cast(node, v, self.mlpc_dtype(dtype))
        return self.emit(node, "softmax", [v])

    def gelu(self, node, x, approximate):
        if approximate not in ("none", "tanh"):
            raise Unsupported(f"GELU approximate={approximate!r}")
        return self.emit(node, "gelu" if approximate == "none" else "gelu_tanh", [self.val(x)])

    def norm(self, node, kind, x, normalized_shape, weight, bias, eps):
        x = self.val(x)
        n = x.dims[-1]
        if normalized_shape is not None and list(normalized_shape) != [n]:
            raise Unsupported(f"{kind} over {list(normalized_shape)}: mlpc normalizes the last dim")
        eps = self.scalar(eps)
        if eps is None:  # nn.RMSNorm(eps=None): torch uses the dtype's machine epsilon
            eps = torch.finfo(TORCH_DTYPES[x.dtype]).eps
        if weight is None and bias is None:  # no affine: the primitives, as mlpc would expand them
            return self.plain_norm(node, kind, x, eps)
        if weight is None or (kind == "layernorm" and bias is None):
            raise Unsupported(f"{kind} with a {'bias' if weight is None else 'weight'} alone")
        operands = [x, self.val(weight)] + ([self.val(bias)] if kind == "layernorm" else [])
        return self.emit(node, kind, operands, number(eps))

    def plain_norm(self, node, kind, x, eps):
        """(x - mean) / sqrt(var + eps) (layernorm) or x / sqrt(mean(x^2) + eps) (rmsnorm), with
        no weight: the IR's composites take one, so the expansion is written out."""
        base = node.name
        dims1 = x.dims[:-1] + (1,) if isinstance(x.dims, tuple) else (1,)
        c = x
        if kind == "layernorm":
            mean = self.emit(node, "reduce_mean", [x], dims=dims1, name=f"{base}.mean")
            c = self.emit(node, "sub", [x, mean], dims=x.dims, name=f"{base}.centred")
        sq = self.emit(node, "square", [c], dims=x.dims, name=f"{base}.sq")
        var = self.emit(node, "reduce_mean", [sq], dims=dims1, name=f"{base}.var")
        ve = self.emit(node, "add_scalar", [var], number(eps), dims=dims1, name=f"{base}.var_eps")
        r = self.emit(node, "rsqrt", [ve], dims=dims1, name=f"{base}.rstd")
        return self.emit(node, "mul", [c, r], dims=x.dims, name=base)

    def reshape(self, node, x):
        """A view that only regroups the leading (batch) dims is nothing in mlpc."""
        src, dst = self.shape(x), self.shape(node)
        if not src or not dst or src[-1] is None or src[-1] != dst[-1] or len(dst) < 2:
            raise Unsupported(f"reshape {src} -> {dst}: mlpc regroups only the leading dims")
        return self.val(x)

    def mlpc_dtype(self, dtype):
        if dtype not in MLPC_DTYPES:
            raise Unsupported(f"cast to {dtype}")
        return MLPC_DTYPES[dtype]

    def to(self, node, x, args, kw):
        dtype = kw.get("dtype")
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            elif isinstance(a, fx.Node) and getattr(self.values.get(a), "dtype", None):
                dtype = self.values[a].dtype
            elif isinstance(a, fx.Node) or not isinstance(a, (str, torch.device)):
                raise Unsupported(f"to({a!r}): only dtype casts are mapped")
        v = self.val(x)
        return v if dtype is None else self.cast(node, v, self.mlpc_dtype(dtype),
                                                 name=node.name)

    # --- node kinds --------------------------------------------------------------------------------
    def call_module(self, node):
        mod = self.gm.get_submodule(node.target)
        x = node.args[0] if node.args else None
        ref = lambda n: self.param_ref(f"{node.target}.{n}")  # noqa: E731
        if isinstance(mod, nn.Linear):
            return self.linear(node, x, ref("weight"), ref("bias") if mod.bias is not None else None)
        if isinstance(mod, IDENTITY_MODULES):
            if isinstance(mod, nn.Dropout) and mod.training:
                raise Unsupported("dropout in training mode")
            return self.val(x)
        if isinstance(mod, nn.GELU):
            return self.gelu(node, x, getattr(mod, "approximate", "none"))
        for cls, op in UNARY_MODULES.items():
            if type(mod) is cls:
                return self.emit(node, op, [self.val(x)])
        if isinstance(mod, nn.Softmax):
            return self.softmax(node, x, mod.dim)
        if isinstance(mod, nn.LayerNorm):
            return self.norm(node, "layernorm", x, mod.normalized_shape,
                             ref("weight") if mod.weight is not None else None,
                             ref("bias") if getattr(mod, "bias", None) is not None else None,
                             mod.eps)
        if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
            return self.norm(node, "rmsnorm", x, mod.normalized_shape,
                             ref("weight") if mod.weight is not None else None, None, mod.eps)
        raise Unsupported("no mlpc op for this module")

    def param_ref(self, key):
        """An operand standing for a submodule's param (call_module nodes have no get_attr)."""
        if key not in self.state:
            raise Unsupported(f"'{key}' is not a parameter or buffer of the module")
        k = _Key(key)
        self.values[k] = ParamRef(key, self.state[key])
        return k

    def call(self, node, f, args, kw):
        """call_function and call_method share one table: `f` is a callable or a method name."""
        get = lambda i, k, d=None: args[i] if len(args) > i else kw.get(k, d)  # noqa: E731
        if f in LINEAR:
            return self.linear(node, args[0], get(1, "weight"), get(2, "bias"))
        if f in (torch.addmm, "addmm"):
            if get(3, "beta", 1) != 1 or get(4, "alpha", 1) != 1:
                raise Unsupported("addmm with beta or alpha other than 1")
            return self.linear(node, args[1], args[2], args[0], transposed=True)
        if f in MATMUL:
            return self.linear(node, args[0], args[1], None, transposed=True)
        if f in (F.gelu, "gelu"):
            return self.gelu(node, args[0], get(1, "approximate", "none"))
        if f in UNARY:
            if len(args) != 1 or any(k != "inplace" for k in kw):
                raise Unsupported(f"arguments {list(kw) or args[1:]} are not supported")
            return self.emit(node, UNARY[f], [self.val(args[0])])
        if f in BINARY:
            if len(args) != 2 or any(k != "alpha" or v != 1 for k, v in kw.items()):
                raise Unsupported(f"extra arguments ({', '.join(kw) or len(args)})")
            if not self.is_tensor(args[0]) and not self.is_tensor(args[1]) and \
                    self.shape(node) is None:
                return Meta()  # arithmetic on sizes or shape tuples
            return self.binary(node, BINARY[f], self.number_or_val(args[0]),
                               self.number_or_val(args[1]))
        if f in POW:
            return self.power(node, args[0], get(1, "exponent"))
        if f in REDUCE:
            return self.reduce(node, REDUCE[f], args[0], get(1, "dim"), get(2, "keepdim", False),
                               kw.get("dtype"))
        if f in SOFTMAX:
            return self.softmax(node, args[0], get(1, "dim"), get(2, "dtype", kw.get("dtype")))
        if f in DROPOUT:
            if get(2, "training", kw.get("train", True)):
                raise Unsupported("dropout in training mode")
            return self.val(args[0])
        if f in (F.layer_norm,):
            return self.norm(node, "layernorm", args[0], get(1, "normalized_shape"),
                             get(2, "weight"), get(3, "bias"), get(4, "eps", 1e-5))
        if hasattr(F, "rms_norm") and f is F.rms_norm:
            return self.norm(node, "rmsnorm", args[0], get(1, "normalized_shape"),
                             get(2, "weight"), None, get(3, "eps"))
        if f in RESHAPES:
            return self.reshape(node, args[0])
        if f == "to" or (f == "type" and args[1:] and isinstance(args[1], torch.dtype)):
            return self.to(node, args[0], args[1:], kw)
        if f in CAST_METHODS and len(args) == 1:
            return self.cast(node, self.val(args[0]), MLPC_DTYPES[CAST_METHODS[f]], name=node.name)
        if f in IDENTITY_METHODS and len(args) == 1 and not kw:
            return self.val(args[0])
        raise Unsupported(f"no mlpc op for this {'method' if isinstance(f, str) else 'function'}")

    def call_function(self, node):
        if node.target is getattr and node.args[1] == "dtype":  # x.dtype, for a later x.to()
            return Meta(TORCH_DTYPES[self.val(node.args[0]).dtype])
        if self.shape(node) is None:
            return self.meta(node)  # sizes, getitem of a shape, sym_size, numbers
        return self.call(node, node.target, node.args, node.kwargs)

    def call_method(self, node):
        if self.shape(node) is None or node.target in SHAPE_METHODS:
            return self.meta(node)
        return self.call(node, node.target, node.args, node.kwargs)

    def get_attr(self, node):
        t = self.state.get(node.target)
        if t is None:
            t = getattr(self.gm, node.target, None)
        if not isinstance(t, torch.Tensor):
            return Meta()
        return ParamRef(node.target, t)

    def placeholder(self, node, index):
        if node.name in self.param_placeholders:
            key, t = self.param_placeholders[node.name]
            return ParamRef(key, t)
        s = self.shapes.get(node)
        if not s:
            return Meta()
        shape, dtype = s
        example = self.example_inputs[index] if index < len(self.example_inputs) else None
        if isinstance(example, torch.Tensor):
            dtype = example.dtype
            if example.dim() == 0:  # a Python number Dynamo lifted: the text holds its value
                self.scalars.append((node, example.item()))
                return Meta(value=example.item())
        if len(shape) < 2:
            raise Unsupported(f"an input of rank {len(shape)}: mlpc inputs are [batch..., N]")
        if shape[-1] is None:
            raise Unsupported("the last dim is symbolic: mlpc's only symbolic dim is the batch")
        v = Value(self.fresh(node.name), self.mlpc_dtype(dtype), shape[-1:])
        self.inputs.append((node, v))
        return v

    # --- the whole graph ---------------------------------------------------------------------------
    def run(self):
        self.inputs, self.scalars, outputs, index = [], [], [], 0
        self.taken.update(self.reserved)  # params keep their module names
        for node in self.gm.graph.nodes:
            try:
                if node.op == "placeholder":
                    self.values[node] = self.placeholder(node, index)
                    index += 1
                elif node.op == "output":
                    outputs = self.outputs(node)
                elif self.probe and node.op in ("call_function", "call_method", "call_module"):
                    self.values[node] = self.probe_node(node)
                else:
                    self.values[node] = getattr(self, node.op)(node)
            except Unsupported as e:
                self.problems.append((describe(node, self.gm), source_location(node), str(e), node))
                self.values[node] = None
            except UpstreamFailed:
                self.values[node] = None
        sig = ", ".join(f"%{v.name}: {v.type()}" for _, v in self.inputs)
        ret_types = ", ".join(v.type() for v in outputs)
        if len(outputs) > 1:
            ret_types = f"({ret_types})"
        text = (f"func @{self.func_name}({sig}) -> {ret_types} {{\n" + "\n".join(self.lines)
                + f"\n  return {', '.join('%' + v.name for v in outputs)}\n}}\n")
        return Translation(text, self.inputs, outputs, self.params, self.sources, self.problems,
                           self.scalars)

    def outputs(self, node):
        results = node.args[0]
        results = list(results) if isinstance(results, (tuple, list)) else [results]
        out = []
        for r in results:
            v = self.values.get(r) if isinstance(r, fx.Node) else None
            if isinstance(r, fx.Node) and r in self.values and v is None:
                raise UpstreamFailed()
            if not isinstance(v, Value) or v.name in self.params or \
                    any(v is iv for _, iv in self.inputs):
                raise Unsupported(f"the output {r!r} is not a tensor computed by the graph")
            out.append(v)
        return out

    def probe_node(self, node):
        """Judges one node with fresh inputs for its tensor operands."""
        saved = dict(self.values)
        for a in node.all_input_nodes:
            v = self.values.get(a)
            s = self.shapes.get(a)
            if (v is None or isinstance(v, Value)) and s and s[0]:
                if s[0][-1] is None:
                    raise Unsupported("an operand's last dim is symbolic")
                dtype = MLPC_DTYPES.get(s[1], "f32")
                self.values[a] = Value(self.fresh(a.name), dtype, s[0][-1:], len(s[0]) > 1)
        before = len(self.lines)
        try:
            v = getattr(self, node.op)(node)
            if any(" = param " not in ln for ln in self.lines[before:]):
                self.computing.add(node)
        finally:
            keep = self.values
            self.values = saved
            self.values.update({k: keep[k] for k in keep if isinstance(k, _Key)})
        self.supported.add(node)
        return v if not isinstance(v, Value) else Value(self.fresh(node.name), v.dtype, v.dims,
                                                        v.batched)


class _Key:
    """Stands for a submodule's param (nn.Linear's weight) where fx has no get_attr node."""
    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


def translate(gm, example_inputs, func_name="f", param_placeholders=None, shapes=None):
    """The mlpc text of `gm` and its params. example_inputs: tensors (or ints for SymInt
    placeholders) in placeholder order; param_placeholders: placeholder name -> (key, tensor) for
    the module tensors that arrive as graph inputs (Dynamo since torch 2.5)."""
    shapes = shapes if shapes is not None else node_shapes(gm, example_inputs)
    return Translator(gm, shapes, example_inputs, func_name, param_placeholders).run()


def supported_nodes(gm, example_inputs, param_placeholders=None, shapes=None):
    """(the nodes mlpc takes, those of them that compute, [(description, location, reason, node)]
    of the nodes it does not take)."""
    shapes = shapes if shapes is not None else node_shapes(gm, example_inputs)
    t = Translator(gm, shapes, example_inputs, "probe", param_placeholders, probe=True)
    t.run()
    return t.supported, t.computing, [p for p in t.problems if p[3].op != "output"]
