"""torch.compile(model, backend="mlpc"): takes Dynamo's torch-level FX graph, compiles what mlpc maps
into mlpc Modules (one per connected part) and leaves the rest to PyTorch; a report says node by
node which ran where and why (mlpc.last_report(); printed when MLPC_VERBOSE=1)."""

import atexit
import collections
import os
import weakref

import torch
import torch.nn as nn

from . import _fx
from ._errors import Error

counters = collections.Counter()  # graphs, mlpc_compiles, cache_hits, partitions, fallbacks
_last = None
_cache = {}  # (mlpc text, spec, param ids) -> (CompiledModule, weakrefs to its params)


def last_report():
    return _last


def reset():
    """Forgets the compiled Modules this process made through the backend, and the counters."""
    global _last
    _cache.clear()
    counters.clear()
    _last = None


# The cached Modules go before the interpreter tears the extension down (nanobind reports objects
# still alive then as leaks).
atexit.register(reset)


class Report:
    """Node by node: what ran on mlpc (which part) and what stayed in PyTorch, with the reason."""

    def __init__(self):
        self.rows = []  # (node name, description, location, where it runs)
        self.note = None  # a line about the whole graph (it fell back whole, and why)
        self.parts = 0
        self.modules = []  # the CompiledModule of each part, in part order

    def __str__(self):
        head = f"mlpc: {self.parts} part(s) of the graph run on mlpc"
        if self.note:
            head += f"; {self.note}"
        w = [max([len(r[i]) for r in self.rows] + [4]) for i in range(3)]
        lines = [head] + [f"  {n:<{w[0]}}  {d:<{w[1]}}  {loc:<{w[2]}}  {status}".rstrip()
                          for n, d, loc, status in self.rows]
        return "\n".join(lines)

    def fallbacks(self):
        return [r for r in self.rows if r[3].startswith("PyTorch")]


class _Support:
    """The OperatorSupport the partitioner asks: the nodes the probe translated."""

    def __init__(self, supported):
        self.supported = supported

    def is_node_supported(self, submodules, node):
        return node in self.supported


class MlpcPart(nn.Module):
    """A part of the graph compiled by mlpc, called in place of the fused submodule. Numbers that
    Dynamo passes as 0-d tensors (dynamic=True lifts math.pi or an eps) are baked into the mlpc
    text: a call where one differs runs the part in PyTorch instead."""

    def __init__(self, compiled, traced, scalars):
        super().__init__()
        self.compiled, self.traced, self.scalars = compiled, traced, scalars

    def forward(self, *args):
        for i, v in self.scalars:
            if args[i].item() != v:
                return self.traced(*args)
        return self.compiled(*args)


def param_placeholders(gm, example_inputs):
    """Placeholders that carry module tensors (Dynamo passes params as graph inputs since torch
    2.5): placeholder name -> (readable key, tensor)."""
    out = {}
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, x in zip(phs, example_inputs):
        if isinstance(x, nn.Parameter) or getattr(x, "_dynamo_static_input_type", None) or \
                "_parameters_" in node.name or "_buffers_" in node.name:
            out[node.name] = (_fx.prettify_param(node.name), x)
    return out


def _needs_grad(gm, example_inputs):
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs) or \
        any(p.requires_grad for p in gm.parameters())


def _compile_cached(sub, examples, params, shapes, positions, tuple_out, spec, name):
    """One mlpc Module per distinct (text, spec, params): a Dynamo recompile of the same graph
    (a new batch size, a new guard) reuses it, so no NVRTC build runs again."""
    from .compiled import from_translation
    tr = _fx.translate(sub, examples, name, params, shapes=shapes)
    if tr.problems:
        raise Error("; ".join(f"{what}: {why}" for what, _, why, _ in tr.problems))
    bases = [t._base if t._base is not None else t for t in tr.params.values()]
    key = (tr.text, tuple(sorted((k, str(v)) for k, v in spec.items())),
           tuple(id(t) for t in bases))
    hit = _cache.get(key)
    if hit and all(r() is t for r, t in zip(hit[1], bases)):
        counters["cache_hits"] += 1
        return hit[0].with_calling(positions, tuple_out)
    cm = from_translation(tr, name, positions, tuple_out, **spec)
    counters["mlpc_compiles"] += 1
    _cache[key] = (cm, [weakref.ref(t) for t in bases])
    return cm


def backend(gm, example_inputs, level=2, decide_batches=None, options=None, **spec):
    """The torch.compile backend: (fx.GraphModule, example inputs) -> a callable. `options`:
    torch.compile's options dict, with mlpc.compile's keywords (level, decide_batches,
    fp32_gemms="auto", ...); they are checked before the graph is looked at."""
    global _last
    from .compiled import check_options
    spec = {**spec, "level": level, "decide_batches": decide_batches, **(options or {})}
    check_options(**spec)
    counters["graphs"] += 1
    report = Report()
    _last = report
    try:
        if _needs_grad(gm, example_inputs):
            report.note = ("the whole graph runs in PyTorch: it needs gradients (grad mode is on "
                           "and an input or param requires grad); call it under torch.no_grad()")
            counters["fallbacks"] += 1
            return gm.forward
        params = param_placeholders(gm, example_inputs)
        phs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        on_cpu = [ph for ph, x in zip(phs, example_inputs) if ph not in params and
                  isinstance(x, torch.Tensor) and not x.is_cuda]
        if on_cpu:
            report.note = (f"the whole graph runs in PyTorch: input(s) {', '.join(on_cpu)} are "
                           "on the CPU, and mlpc runs on CUDA tensors")
            counters["fallbacks"] += 1
            return gm.forward
        return _partition(gm, list(example_inputs), report, spec)
    finally:
        if os.environ.get("MLPC_VERBOSE") == "1":
            print(report)


def partition_report(gm, example_inputs):
    """The report of how the backend would partition `gm`, without compiling anything."""
    report = Report()
    _partition(gm, list(example_inputs), report, None)
    return report


def _partition(gm, example_inputs, report, spec):
    """Partitions gm and, unless spec is None, compiles each part (those that fail stay in
    PyTorch). Returns the callable for Dynamo."""
    params = param_placeholders(gm, example_inputs)
    shapes = _fx.node_shapes(gm, example_inputs)
    supported, computing, problems = _fx.supported_nodes(gm, example_inputs, params, shapes)
    reasons = {p[3]: p for p in problems}
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    examples = {n.name: x for n, x in zip(phs, example_inputs)}  # fusing may copy the nodes

    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    partitioner = CapabilityBasedPartitioner(gm, _Support(supported),
                                             allows_single_node_partition=True)
    order = {n: k for k, n in enumerate(gm.graph.nodes)}
    partitions = sorted((p for p in partitioner.propose_partitions()
                         if any(n in computing for n in p.nodes)),
                        key=lambda p: min(order[n] for n in p.nodes))
    part_of = {n: i for i, p in enumerate(partitions) for n in p.nodes}
    by_name = {n.name: n for n in gm.graph.nodes}
    nodes = [(n, n.name, _fx.describe(n, gm), _fx.source_location(n)) for n in gm.graph.nodes
             if n.op not in ("placeholder", "output", "get_attr")]
    compile_parts = spec is not None and partitions
    fused = partitioner.fuse_partitions(partitions) if compile_parts else gm  # changes gm too
    failed = {}
    index = 0
    for node in list(fused.graph.nodes):
        if not compile_parts or node.op != "call_module" or not node.target.startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        i = part_of[by_name[next(n.name for n in sub.graph.nodes if n.op not in
                                 ("placeholder", "output"))]]
        sub_phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
        outer_args = list(node.args)
        sub_examples = [examples.get(a.name) for a in outer_args]
        sub_params = {ph.name: params[a.name] for ph, a in zip(sub_phs, outer_args)
                      if a.name in params}
        sub_params.update({ph.name: (a.target, _get_attr(gm, a.target))
                           for ph, a in zip(sub_phs, outer_args) if a.op == "get_attr"})
        sub_shapes = {n: shapes.get(by_name.get(n.name)) for n in sub.graph.nodes
                      if n.op != "output"}
        positions = [k for k, ph in enumerate(sub_phs)
                     if ph.name not in sub_params and sub_shapes.get(ph)]
        out_node = next(n for n in sub.graph.nodes if n.op == "output")
        try:
            cm = _compile_cached(sub, sub_examples, sub_params, sub_shapes, positions,
                                 isinstance(out_node.args[0], (tuple, list)), spec,
                                 f"part{index}")
            scalars = [(sub_phs.index(ph), v) for ph, v in cm.translation.scalars]
            setattr(fused, node.target, MlpcPart(cm, sub, scalars))
            report.modules.append(cm)
            index += 1
        except Exception as e:  # a part that mlpc cannot compile runs in PyTorch, as traced
            failed[i] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    report.parts = index if spec is not None else len(partitions)
    counters["partitions"] += index
    ok_parts = {}
    for i in range(len(partitions)):
        if i not in failed:
            ok_parts[i] = len(ok_parts)
    for n, name, what, where in nodes:
        i = part_of.get(n)
        if i is not None and i in ok_parts:
            status = f"mlpc part {ok_parts[i]}"
        elif i is not None:
            status = f"PyTorch: its part failed to compile: {failed[i]}"
        elif n in reasons:
            status = f"PyTorch: {reasons[n][2]}"
        elif n in supported:
            status = "PyTorch: nothing to compute around it (a size, a view, an identity)"
        else:
            status = "PyTorch: an operand comes from PyTorch and its part was not formed"
        report.rows.append((name, what, where, status))
    if report.parts == 0:
        counters["fallbacks"] += 1
        report.note = "the whole graph runs in PyTorch"
        return gm.forward
    fused.recompile()
    return _whole(fused, phs) or fused.forward


def _whole(fused, outer_phs):
    """Where one mlpc part is the whole graph (placeholders -> part -> the output tuple), a call
    goes straight to it, past the GraphModule's forward."""
    calls = [n for n in fused.graph.nodes if n.op not in ("placeholder", "output")]
    out = next(n for n in fused.graph.nodes if n.op == "output").args[0]
    part = getattr(fused, calls[0].target, None) if len(calls) == 1 else None
    if not isinstance(part, MlpcPart) or part.scalars or not isinstance(out, (tuple, list)) or \
            list(out) != calls:
        return None
    part = part.compiled
    index = {ph.name: k for k, ph in enumerate(outer_phs)}
    names = [getattr(calls[0].args[k], "name", None) for k in part.positions]
    if any(n not in index for n in names):
        return None
    cm = part.with_calling([index[n] for n in names], False)

    def run_whole(*args):
        return (cm(*args),)
    return run_whole


def _get_attr(gm, target):
    obj = gm
    for a in target.split("."):
        obj = getattr(obj, a)
    return obj
