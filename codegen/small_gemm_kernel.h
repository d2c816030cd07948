// A GEMM small enough that cuBLASLt's fixed cost dominates it (the article's nn.Linear, a small
// fp32 MLP at batch 64: several times the GEMM's own work in fixed cost) as one generated
// kernel: y[rows, n] = act(x[rows, k] . w[n, k]^T + bias), fp32 accumulation, the epilogue (bias,
// any matmul activation) applied before the single rounding to the output dtype.
//
// Shape: a block of 256 threads computes 256 / P outputs of one row; P threads share each output,
// each summing every P-th 16-byte chunk of the K-long dot product (the loads of a thread are
// independent, so a row costs about one L2 round trip), then log2(P) shuffles combine them.
// P is 8, or fewer when K has fewer chunks than that (the article's Linear: K = 32 bf16 is 4
// chunks, so P = 4 and no thread idles). The grid is one block per (row, 256 / P columns):
// launched like a row kernel whose "rows" are those column tiles (SimtGemm::tile_cols).
#pragma once

#include <optional>

#include "codegen/plan.h"

namespace mlpc::codegen {

inline constexpr int kSmallGemmThreads = 256;   // per block
inline constexpr int kSmallGemmMaxParts = 8;    // threads sharing one output, at most
inline constexpr int kSmallGemmMinTile = kSmallGemmThreads / kSmallGemmMaxParts;  // 32 columns

// The kernel for `g` (its buffers become the step's inputs: x, w and the bias when there is one),
// or nullopt when this kernel cannot compute it: an epilogue passes/gemm_epilogue.h says it does
// not run, or n not a multiple of kSmallGemmMinTile.
std::optional<KernelStep> generate_small_gemm_kernel(const GemmStep& g);

// A block per tile of tile_cols columns of a row of the output's `numel` elements.
LaunchDims launch_dims(const SimtGemm& s, const KernelStep& k, int64_t numel);

}  // namespace mlpc::codegen
