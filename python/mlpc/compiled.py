"""CompiledModule: one mlpc Module called on torch CUDA tensors without copies. All a call needs
is worked out at compile time; a call checks its inputs, allocates the outputs and hands raw
pointers, the row count and the current stream to the extension's run_ptrs."""

import copy

import torch
import torch.fx as fx

from . import _fx
from ._errors import Error, InputTypeError, InputValueError, UnsupportedError

_DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
    (lambda index: torch.cuda.current_stream(index).cuda_stream)


def _ext():
    try:
        from . import _mlpc
    except ImportError as e:
        raise Error(f"mlpc's extension is not built here ({e}): `pip install .` builds it") from e
    return _mlpc


def check_example_inputs(example_inputs):
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor) and x.dtype not in _DTYPE_NAMES:
            raise InputTypeError(f"example input {i} is {x.dtype}; mlpc takes float32, float16 "
                                 "and bfloat16 tensors")


class CompiledModule:
    """Call it like the module's forward: CUDA tensors [batch..., N] in, new tensors out."""

    def __init__(self, translation, module, positions, tuple_out):
        self._module = module  # the extension's Module: run_ptrs(...) is the C++ run
        self.translation = translation
        self.positions = positions  # which call arguments are mlpc's inputs, in its order
        self._in = [(_fx.TORCH_DTYPES[v.dtype], v.dims[-1]) for _, v in translation.inputs]
        self._in_names = [n.name for n, _ in translation.inputs]
        self._out = [(_fx.TORCH_DTYPES[v.dtype], v.dims) for v in translation.outputs]
        self._tuple_out = tuple_out
        self._run = module.run_ptrs
        self._keep = []  # the device tensors bound as params: alive while the Module is
        self._bound = False
        if _ext().gpu_available()[0]:
            self.bind_params()

    def with_calling(self, positions, tuple_out):
        """This Module (shared, params bound once) called with other arguments."""
        other = copy.copy(self)
        other.positions, other._tuple_out = positions, tuple_out
        return other

    # --- what the CLI prints ----------------------------------------------------------------------
    @property
    def text(self):
        return self.translation.text

    @property
    def ir(self):
        return self._module.ir()

    @property
    def fusion_report(self):
        return self._module.fusion_report()

    @property
    def plan(self):
        return self._module.plan(4096)

    def explain(self, batch=4096):
        return self._module.explain(batch)

    @property
    def kernels(self):
        return dict(self._module.kernel_sources())

    def launches(self, batch):
        return self._module.launches(batch)

    def nvrtc_builds_since_compile(self):
        return self._module.nvrtc_builds_since_compile()

    # --- params -----------------------------------------------------------------------------------
    def bind_params(self):
        """CUDA params are bound by pointer (a transposed Conv1D weight is laid out once); CPU
        params are uploaded."""
        keep = []
        for name, t in self.translation.params.items():
            t = t.detach()
            if t.is_cuda:
                t = t.contiguous()
                keep.append(t)
                self._module.bind_param(name, t.data_ptr(), _dtype(t), list(t.shape))
            else:
                t = t.contiguous()
                self._module.set_param(name, t.data_ptr(), _dtype(t), list(t.shape))
        self._keep, self._bound = keep, True

    # --- a forward --------------------------------------------------------------------------------
    def __call__(self, *args):
        xs = args if self.positions is None else [args[i] for i in self.positions]
        if len(xs) != len(self._in):
            raise InputTypeError(f"{len(xs)} inputs given; the module takes {len(self._in)}")
        x0 = xs[0]
        if not isinstance(x0, torch.Tensor) or x0.dim() < 2:
            self._reject(xs, None)
        lead = x0.shape[:-1]
        rows = lead.numel()
        ptrs = []
        for x, (dtype, last) in zip(xs, self._in):
            if not isinstance(x, torch.Tensor) or x.dtype is not dtype or x.shape[-1] != last or \
                    not x.is_contiguous() or not x.is_cuda or x.shape[:-1].numel() != rows:
                self._reject(xs, rows)
            ptrs.append(x.data_ptr())
        device = x0.device
        outs = [torch.empty(lead + dims, dtype=dtype, device=device) for dtype, dims in self._out]
        if rows:
            if not self._bound:
                self.bind_params()
            self._run(ptrs, [o.data_ptr() for o in outs], rows, _raw_stream(device.index))
        return tuple(outs) if self._tuple_out else outs[0]

    def _reject(self, xs, rows):
        """Raises the one exception that says what is wrong with the inputs."""
        for i, (x, (dtype, last)) in enumerate(zip(xs, self._in)):
            what = f"input {i} ('{self._in_names[i]}')"
            if not isinstance(x, torch.Tensor):
                raise InputTypeError(f"{what} is a {type(x).__name__}, not a torch.Tensor")
            if x.dtype not in _DTYPE_NAMES:
                raise InputTypeError(f"{what} is {x.dtype}; mlpc takes float32, float16 and "
                                     f"bfloat16, and this module was compiled for {dtype}")
            if x.dtype is not dtype:
                raise InputTypeError(f"{what} is {x.dtype}; the module was compiled for {dtype}")
            if x.dim() < 2 or x.shape[-1] != last:
                raise InputValueError(f"{what} has shape {list(x.shape)}; the module takes "
                                      f"[batch..., {last}]")
            if not x.is_contiguous():
                raise InputValueError(f"{what} is not contiguous (strides {list(x.stride())}): "
                                      "call .contiguous() first")
            if not x.is_cuda:
                raise InputValueError(f"{what} is on {x.device}; the module runs on CUDA tensors")
            if rows is not None and x.shape[:-1].numel() != rows:
                raise InputValueError(f"{what} has {x.shape[:-1].numel()} rows, input 0 {rows}: "
                                      "every input must have the same batch")
        raise Error("inputs rejected for a reason not named")  # unreachable: a check above fires


def _dtype(t):
    return getattr(_ext().DType, _DTYPE_NAMES[t.dtype])


def compile(module, example_inputs, level=2, decide_batches=None, arch="", cuda_graphs=True,
            tune_gemms=True, name=None, **kernels):
    """The CompiledModule of `module` (an nn.Module, traced with torch.fx, or an fx.GraphModule)
    for inputs like `example_inputs`. `kernels`: the level's kernel choices overridden by name,
    as `mlpc compile`'s flags take them (fp32_gemms="auto" lets f32 GEMMs run as 3xTF32 in
    K-chunks where that times faster; merge_gemms, small_gemms, gated_gemms, transposed_x,
    fused_mlp)."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = [example_inputs]
    example_inputs = list(example_inputs)
    check_example_inputs(example_inputs)
    gm = module if isinstance(module, fx.GraphModule) else _fx.trace(module)
    name = _fx.re.sub(r"\W", "_", name or type(module).__name__.lower())
    tr = _fx.translate(gm, example_inputs, name)
    if tr.problems:
        raise UnsupportedError(f"{len(tr.problems)} op(s) of {name} have no mlpc equivalent:\n"
                               + "\n".join(tr.problem_lines()))
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    return from_translation(tr, name, None, isinstance(out_node.args[0], (tuple, list)), level,
                            decide_batches, arch, cuda_graphs, tune_gemms, **kernels)


def check_options(level=2, decide_batches=None, arch="", cuda_graphs=True, tune_gemms=True,
                  **kernels):
    """Raises the mlpc.Error a compile with these keywords would (a level, a kernel choice or its
    value, a batch size), compiling nothing."""
    _ext().check_spec(level, *_batches_and_kernels(decide_batches, kernels))


def _batches_and_kernels(decide_batches, kernels):
    """decide_batches and the kernel choices as the extension takes them."""
    return [int(b) for b in decide_batches or []], {str(k): str(v) for k, v in kernels.items()}


def from_translation(tr, name, positions, tuple_out, level=2, decide_batches=None, arch="",
                     cuda_graphs=True, tune_gemms=True, **kernels):
    """Compiles a translation. positions: which call arguments are mlpc's inputs (None: all, in
    order); tuple_out: a call returns a tuple."""
    batches, choices = _batches_and_kernels(decide_batches, kernels)
    m = _ext().compile(tr.text, level, batches, arch or "", cuda_graphs, tune_gemms, f"<{name}>",
                       choices)
    return CompiledModule(tr, m, positions, tuple_out)
