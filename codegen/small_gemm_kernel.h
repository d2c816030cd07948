// A GEMM small enough that cuBLASLt's fixed cost dominates it (the article's nn.Linear, a small
// fp32 MLP at batch 64: 7-9 µs a GEMM on the H200 for microseconds of work) as one generated
// kernel: y[rows, n] = epilogue(x[rows, k] . w[n, k]^T), fp32 accumulation, the epilogue (bias,
// relu, gelu_tanh) applied before the single rounding to the output dtype.
//
// Shape: a block of 256 threads computes 32 outputs of one row; 8 threads share each output,
// each summing every 8th 16-byte chunk of the K-long dot product (the 8 loads of a thread are
// independent, so a row costs about one L2 round trip), then a 3-step shuffle combines them.
// The grid is one block per (row, 32 columns): rows * n / 32 blocks. Launched like a row kernel
// whose "rows" are those 32-column tiles (KernelStep::out_row_len = 32).
#pragma once

#include <optional>

#include "codegen/plan.h"

namespace mlpc::codegen {

inline constexpr int kSmallGemmTile = 32;  // output columns per block

// The kernel for `g` (its buffers become the step's inputs: x, w and the bias when there is one),
// or nullopt when this kernel cannot compute it: a residual through C, or n not a multiple of
// kSmallGemmTile.
std::optional<KernelStep> generate_small_gemm_kernel(const GemmStep& g);

}  // namespace mlpc::codegen
