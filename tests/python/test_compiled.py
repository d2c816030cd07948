"""mlpc.compile through the extension, on a machine without a GPU: every block compiles (.ir and
.plan printed), and each kind of bad input gets one clear exception. Skipped where the extension
is not built."""

import unittest

import torch

from common import block, models, needs_extension  # first: puts the checkout's mlpc on sys.path
import mlpc  # noqa: E402


@needs_extension
class Compile(unittest.TestCase):
    def test_every_supported_block_compiles_without_a_gpu(self):
        for name in models.BLOCKS:
            if name == "leaky_mlp":
                continue
            with self.subTest(block=name):
                m, x, _ = block(name)
                cm = mlpc.compile(m, [x], level=2)
                self.assertIn("func @", cm.ir)
                self.assertTrue(cm.plan.strip())
                self.assertTrue(cm.fusion_report.strip())
                self.assertIsInstance(cm.kernels, dict)  # empty where cuBLASLt runs it all
                self.assertGreater(cm.launches(16), 0)
                self.assertTrue(cm.explain(16).strip())

    def test_fusion_keeps_gemms_and_fuses_the_rest(self):
        m, x, _ = block("gpt2_mlp")
        eager = mlpc.compile(m, [x], level=0)
        fused = mlpc.compile(m, [x], level=1)
        self.assertLess(fused.launches(16), eager.launches(16))
        self.assertTrue(fused.kernels)  # NewGELU's chain: a generated kernel

    def test_an_unsupported_op_is_one_error_naming_it(self):
        m, x, _ = block("leaky_mlp")
        with self.assertRaises(mlpc.UnsupportedError) as e:
            mlpc.compile(m, [x])
        self.assertIn("leaky_relu at tests/python/models.py", str(e.exception))
        self.assertIn("cumsum at tests/python/models.py", str(e.exception))

    def test_kernel_choices_reach_the_compiler(self):
        m, x, _ = block("gpt2_mlp")  # float32: its GEMMs may run as 3xTF32 when asked
        ieee = mlpc.compile(m, [x], level=2)
        tf32x3 = mlpc.compile(m, [x], level=2, fp32_gemms="tf32x3")
        self.assertNotIn("tf32x3", ieee.plan)
        self.assertIn("tf32x3", tf32x3.plan)
        self.assertGreater(tf32x3.launches(16), 0)

    def test_a_bad_kernel_choice_is_one_error_naming_the_choices(self):
        m, x, _ = block("t5_small_ff")
        for kernels, words in (({"fp32_gemms": "fast"},
                                "fp32_gemms 'fast': expected one of auto, ieee, tf32x3"),
                               ({"fp32_gemm": "auto"},
                                "kernel choice 'fp32_gemm': expected one of merge_gemms")):
            with self.subTest(**kernels), self.assertRaises(mlpc.Error) as e:
                mlpc.compile(m, [x], **kernels)
            self.assertEqual(len(str(e.exception).splitlines()), 1)
            self.assertIn(words, str(e.exception))

    def test_the_backend_checks_torch_compiles_options_first(self):
        from mlpc import backend
        m, x, gm = block("t5_small_ff")
        graphs = backend.counters["graphs"]
        with self.assertRaises(mlpc.Error) as e:
            backend.backend(gm, [x], options={"gated_gemms": "always"})
        self.assertIn("gated_gemms 'always': expected one of auto, on, off, mma",
                      str(e.exception))
        with self.assertRaises(mlpc.Error) as e:
            backend.backend(gm, [x], options={"level": 3})
        self.assertIn("optimization level 3", str(e.exception))
        self.assertEqual(backend.counters["graphs"], graphs)  # refused before the graph

    def test_a_float64_example_is_refused(self):
        m, x, _ = block("t5_small_ff")
        with self.assertRaises(TypeError) as e:
            mlpc.compile(m.double(), [x.double()])
        self.assertIsInstance(e.exception, mlpc.Error)


@needs_extension
class BadInputs(unittest.TestCase):
    """Each check comes before the GPU is needed, so all of them run here."""

    @classmethod
    def setUpClass(cls):
        m, cls.x, _ = block("t5_small_ff")
        cls.cm = mlpc.compile(m, [cls.x], level=1)

    def rejects(self, kind, x, words):
        with self.assertRaises(kind) as e:
            self.cm(x)
        self.assertIsInstance(e.exception, mlpc.Error)
        self.assertIn(words, str(e.exception))

    def test_unsupported_dtypes(self):
        self.rejects(TypeError, self.x.double(), "torch.float64; mlpc takes float32")
        self.rejects(TypeError, self.x.to(torch.int32), "torch.int32")
        self.rejects(TypeError, self.x.half(), "compiled for torch.float32")

    def test_not_a_tensor(self):
        self.rejects(TypeError, [1.0], "not a torch.Tensor")

    def test_non_contiguous_input(self):
        self.rejects(ValueError, self.x.transpose(0, 1), "not contiguous")

    def test_cpu_tensor(self):
        self.rejects(ValueError, self.x, "is on cpu; the module runs on CUDA tensors")

    def test_wrong_trailing_shape(self):
        self.rejects(ValueError, self.x[..., :-1].contiguous(), "the module takes [batch...,")

    def test_wrong_number_of_inputs(self):
        with self.assertRaises(TypeError):
            self.cm(self.x, self.x)


if __name__ == "__main__":
    unittest.main()
