"""The torch.compile backend's partitioning and its report, on the CPU: which nodes run on mlpc
(in which part) and which stay in PyTorch with the reason. Pure Python, extension or not."""

import unittest

import torch

from common import ROOT, block, golden  # first: puts the checkout's mlpc on sys.path
import mlpc  # noqa: E402
from mlpc import backend  # noqa: E402

INSTALLED = not mlpc.__file__.startswith(ROOT)


class Partition(unittest.TestCase):
    def test_an_unsupported_op_in_the_middle_splits_the_graph(self):
        _, x, gm = block("leaky_mlp")
        report = backend.partition_report(gm, [x])
        self.assertEqual(report.parts, 2)
        golden(self, "leaky_mlp.partition.txt", str(report) + "\n")

    def test_a_supported_block_is_one_part(self):
        for name in ("gpt2_mlp", "llama3_8b_ffn", "bert_base_ffn"):
            with self.subTest(block=name):
                _, x, gm = block(name)
                report = backend.partition_report(gm, [x])
                self.assertEqual((report.parts, report.fallbacks()), (1, []), str(report))

    def test_a_graph_that_needs_gradients_falls_back_whole(self):
        m, x, gm = block("t5_small_ff")
        with torch.enable_grad():
            f = backend.backend(gm, [x])
        self.assertIn("needs gradients", backend.last_report().note)
        with torch.no_grad():
            self.assertTrue(torch.equal(f(x), m(x)))

    def test_cpu_inputs_fall_back_whole(self):
        m, x, gm = block("t5_small_ff")
        with torch.no_grad():
            f = backend.backend(gm, [x])
            self.assertIn("on the CPU", backend.last_report().note)
            self.assertTrue(torch.equal(f(x), m(x)))

    @unittest.skipUnless(hasattr(torch, "compile") and INSTALLED,
                         "torch.compile needs torch 2; the entry point needs mlpc installed")
    def test_torch_compile_finds_the_backend_by_name(self):
        from torch._dynamo import lookup_backend
        self.assertIs(lookup_backend("mlpc"), backend.backend)


if __name__ == "__main__":
    unittest.main()
