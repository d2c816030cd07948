// fp32 GEMMs on TF32 tensor cores at close to fp32 accuracy ("3xTF32"): each operand value v
// is split into hi = tf32(v) and lo = tf32(v - hi), and x . w is computed as
//   lo_x . hi_w + hi_x . lo_w + hi_x . hi_w
// (the lo_x . lo_w term, ~2^-22 relative, is dropped). Laying the parts side by side along K,
//   x3 = [lo_x | hi_x | hi_x]   and   w3 = [hi_w | lo_w | hi_w],
// makes that sum one ordinary TF32 GEMM over K' = 3K with fp32 accumulation — a cuBLASLt call
// with CUBLAS_COMPUTE_32F_FAST_TF32, epilogues included. The small terms come first in K so the
// accumulator holds them before the large ones. Weights are split once, when they are set
// (host side, split_tf32x3 below); activations by the kernel that writes them (the device
// helper below), both rounding the same way: to nearest at TF32's 10 mantissa bits, ties away
// from zero (PTX cvt.rna's rounding), never rounding a finite value up to infinity.
// Accuracy: each product keeps ~21 bits and tensor cores accumulate without IEEE rounding, so
// results differ from IEEE fp32's by a few times IEEE's own error (mlp3 on the H200: 5.6e-6 vs
// 7.6e-7 max abs error against fp64), where one TF32 product (PyTorch's "high" matmul precision
// on Hopper) is ~2^-11 relative. That is why it is asked for (--fp32-gemms), never a default,
// and checked with its own tolerance (runtime/tolerance.h). The excess is the tensor cores'
// accumulation over long K, not the split (bench/tf32x3_accuracy.py: a lo.lo term changes
// nothing; summing K-chunks outside the tensor cores brings it below IEEE's).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace mlpc::codegen {

// Which of the three K-blocks holds the lo part; the other two hold hi.
inline constexpr int kTf32x3ActivationLoPart = 0;
inline constexpr int kTf32x3WeightLoPart = 1;

float tf32_round(float v);

// rows x k values (row-major) -> rows x 3k: each row's three parts, lo in block `lo_part`.
std::vector<float> split_tf32x3(const std::vector<float>& values, int64_t rows, int64_t k,
                                int lo_part);

// CUDA source: mlpc_tf32(v) and mlpc_store_tf32x3<N>(out, e, row_len, v), which stores the N
// consecutive values v of element e (of a [rows, row_len] space; N divides row_len) as their
// three parts in out = [rows, 3 * row_len], lo in block kTf32x3ActivationLoPart. Needs
// vector_access()'s mlpc_store.
std::string_view tf32x3_device_helpers();

}  // namespace mlpc::codegen
