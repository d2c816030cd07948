#!/usr/bin/env python3
"""Runs the Python tests (unittest) and closes with one 'python: N passed, N failed, N skipped'
line. Exit 77 (skipped) when this python has no torch."""

import os
import sys
import unittest

try:
    import torch  # noqa: F401
except ImportError:
    print("python tests: skipped: this python has no torch")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
failed = len(result.failures) + len(result.errors)
skipped = len(result.skipped)
print(f"python: {result.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
sys.exit(0 if result.wasSuccessful() else 1)
