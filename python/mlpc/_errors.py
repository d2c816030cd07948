"""mlpc's Python exceptions, in pure Python so the extension's translator of mlpc::Error and the
translation (which needs no extension) raise one class."""


class Error(RuntimeError):
    """A user-facing mlpc error: bad text, shapes or inputs, no GPU, a kernel that fails to build."""


class UnsupportedError(Error):
    """The graph has ops mlpc does not map; the message lists each with its source location."""


class InputTypeError(Error, TypeError):
    """A call's input has the wrong type or dtype (float64, int, not a tensor)."""


class InputValueError(Error, ValueError):
    """A call's input has the wrong shape or layout, or is not on the GPU."""
