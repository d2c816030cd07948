"""FX -> mlpc text for every block of models.py, golden-tested: the printed text is the oracle
(style.md #7). Pure Python: runs with any torch, extension or not."""

import unittest

import torch
import torch.nn as nn

from common import block, golden, models
from mlpc import _fx


class TranslateBlocks(unittest.TestCase):
    def test_every_supported_block_matches_its_golden_text(self):
        for name in models.BLOCKS:
            if name == "leaky_mlp":
                continue
            with self.subTest(block=name):
                _, x, gm = block(name)
                tr = _fx.translate(gm, [x], name)
                self.assertEqual(tr.problem_lines(), [])
                golden(self, f"{name}.mlp", tr.text)

    def test_conv1d_weights_are_bound_transposed(self):
        m, x, gm = block("gpt2_mlp")
        tr = _fx.translate(gm, [x], "gpt2")
        w = tr.params["c_fc.weight_t"]
        self.assertEqual(tr.sources["c_fc.weight_t"], "c_fc.weight")
        self.assertTrue(torch.equal(w, m.c_fc.weight.t()))

    def test_unsupported_ops_are_named_with_their_lines(self):
        _, x, gm = block("leaky_mlp")
        tr = _fx.translate(gm, [x], "leaky")
        golden(self, "leaky_mlp.problems.txt", "\n".join(tr.problem_lines()) + "\n")

    def test_dropout_in_training_mode_is_refused(self):
        m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1)).train()
        tr = _fx.translate(_fx.trace(m), [torch.randn(4, 8)], "f")
        self.assertIn("dropout in training mode", tr.problem_lines()[0])

    def test_reshapes_other_than_of_leading_dims_are_refused(self):
        class Heads(nn.Module):
            def forward(self, x):
                return x.view(x.size(0), 2, 4).relu()
        tr = _fx.translate(_fx.trace(Heads()), [torch.randn(3, 8)], "f")
        self.assertIn("regroups only the leading dims", "\n".join(tr.problem_lines()))

    def test_pow_other_exponents_are_refused(self):
        class Cube(nn.Module):
            def forward(self, x):
                return x ** 3 + torch.pow(x, 2) + x ** 1.5
        tr = _fx.translate(_fx.trace(Cube()), [torch.randn(3, 8)], "f")
        lines = tr.problem_lines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("exponent 1.5", lines[0])


if __name__ == "__main__":
    unittest.main()
