"""mlpc from Python. The translation of torch.fx graphs into mlpc's text form (_fx) is pure
Python, so tools and CPU tests use it without the extension."""

from ._errors import Error, UnsupportedError

__all__ = ["Error", "UnsupportedError"]
