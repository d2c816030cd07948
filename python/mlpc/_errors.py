"""mlpc's Python exceptions, in pure Python so the extension's translator of mlpc::Error and the
translation (which needs no extension) raise one class."""


class Error(RuntimeError):
    """A user-facing mlpc error: bad text, shapes or inputs, no GPU, a kernel that fails to build."""


class UnsupportedError(Error):
    """The graph has ops mlpc does not map; the message lists each with its source location."""
