"""What the Python tests share: the checkout's python/ on sys.path (when mlpc is not installed),
the blocks of models.py at test size, and golden files (MLPC_UPDATE_GOLDEN=1 rewrites them)."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
try:
    import mlpc  # noqa: F401  (installed: the extension is beside it)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import models  # noqa: E402

SCALE = 16  # widths / 16: the published shapes, small enough for CPU tests
os.chdir(ROOT)  # source locations in reports are relative to the checkout


def block(name):
    """(module, example input [2, 3, d] in the block's dtype, fx GraphModule)."""
    from mlpc import _fx
    m, d = models.build(name, scale=SCALE)
    dtype = next(m.parameters()).dtype
    x = torch.randn(2, 3, d, generator=torch.Generator().manual_seed(0)).to(dtype)
    return m, x, _fx.trace(m)


def extension():
    """mlpc's extension module, or None where it is not built."""
    try:
        from mlpc import _mlpc
        return _mlpc
    except ImportError:
        return None


def golden(test, name, text):
    path = os.path.join(HERE, "golden", name)
    if os.environ.get("MLPC_UPDATE_GOLDEN") == "1":
        with open(path, "w") as f:
            f.write(text)
    test.assertTrue(os.path.exists(path), f"{path} is missing: run with MLPC_UPDATE_GOLDEN=1")
    with open(path) as f:
        expected = f.read()
    test.assertEqual(expected, text, f"{name} differs from the golden file; got:\n{text}")


needs_extension = unittest.skipIf(extension() is None, "mlpc's extension is not built here")
