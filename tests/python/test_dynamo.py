"""Dynamo's graphs (torch 2 only; skipped with torch 1.13): params arrive as placeholders, sizes
as SymInts, and under dynamic=True Python numbers as 0-d inputs; every supported block must still
be one mlpc part, and the unsupported one must split. Runs on the CPU: nothing is executed."""

import unittest

import torch

from common import block, extension, models
from mlpc import _fx, backend


def dynamo_graph(name, dynamic):
    """(Dynamo's GraphModule of block `name`, its example inputs)."""
    m, x, _ = block(name)
    got = {}

    def capture(gm, example_inputs):
        got["gm"], got["inputs"] = gm, list(example_inputs)
        return gm.forward
    torch._dynamo.reset()
    with torch.no_grad():
        f = torch.compile(m, backend=capture, dynamic=dynamic)
        if dynamic is None:
            torch._dynamo.mark_dynamic(x, 0)
        f(x)
    return got["gm"], got["inputs"]


@unittest.skipUnless(hasattr(torch, "compile"), "Dynamo needs torch 2")
class DynamoGraphs(unittest.TestCase):
    def test_every_supported_block_is_one_part(self):
        for dynamic in (None, True):
            for name in models.BLOCKS:
                if name == "leaky_mlp":
                    continue
                with self.subTest(block=name, dynamic=dynamic):
                    gm, inputs = dynamo_graph(name, dynamic)
                    report = backend.partition_report(gm, inputs)
                    self.assertEqual((report.parts, report.fallbacks()), (1, []), str(report))
                    params = backend.param_placeholders(gm, inputs)
                    tr = _fx.translate(gm, inputs, name, params)
                    self.assertEqual(tr.problem_lines(), [])
                    self.assertEqual(len(tr.inputs), 1, tr.text)

    def test_the_unsupported_ops_split_the_graph(self):
        gm, inputs = dynamo_graph("leaky_mlp", None)
        report = backend.partition_report(gm, inputs)
        self.assertEqual(report.parts, 2, str(report))
        self.assertEqual(sorted(r[1].split(".")[-1] for r in report.fallbacks()),
                         ["cumsum", "leaky_relu"])

    @unittest.skipIf(extension() is None, "mlpc's extension is not built here")
    def test_every_part_compiles_and_dynamic_numbers_are_baked(self):
        for name, parts in (("leaky_mlp", 2), ("bert_base_ffn", 1), ("llama3_8b_ffn", 1)):
            with self.subTest(block=name):
                gm, inputs = dynamo_graph(name, True)
                report = backend.Report()
                backend._partition(gm, inputs, report, dict(level=1))
                self.assertEqual(len(report.modules), parts, str(report))
                self.assertEqual(report.fallbacks() != [], name == "leaky_mlp", str(report))
        eps = [v for _, v in report.modules[0].translation.scalars]
        self.assertEqual(eps, [1e-5])  # llama's RMSNorm eps, lifted by dynamic=True


if __name__ == "__main__":
    unittest.main()
