"""mlpc from Python: compile a torch module (or an fx.GraphModule) into one mlpc Module and call it
on CUDA tensors without copies; `torch.compile(m, backend="mlpc")` partitions a graph around the ops
mlpc lacks. The translation (_fx) is pure Python; the extension (_mlpc) is imported on first use."""

from ._errors import Error, InputTypeError, InputValueError, UnsupportedError

__all__ = ["Error", "UnsupportedError", "InputTypeError", "InputValueError", "compile", "CompiledModule", "last_report", "backend"]


def compile(module, example_inputs, level=2, decide_batches=None, **spec):
    """Compiles `module` (an nn.Module or fx.GraphModule) for inputs like `example_inputs`."""
    from .compiled import compile as _compile
    return _compile(module, example_inputs, level=level, decide_batches=decide_batches, **spec)


def last_report():
    """The partition report of the latest torch.compile(..., backend="mlpc") graph."""
    from .backend import last_report as _last
    return _last()


def __getattr__(name):  # the rest on first use, so `import mlpc` stays light
    import importlib
    if name == "CompiledModule":
        return importlib.import_module(".compiled", __name__).CompiledModule
    if name == "backend":
        return importlib.import_module(".backend", __name__)
    raise AttributeError(f"module 'mlpc' has no attribute {name!r}")
