// Turns one fused.reduction region into a CUDA C++ row kernel: a warp per row for short rows, a
// block per row for long ones (chosen by row length); the row's inputs are loaded once into
// registers (16-byte accesses when alignment allows), each reduction is one pass over them with
// fp32 accumulation and a warp-shuffle (and shared-memory) combine, and the epilogue writes the
// output row. Long rows that do not fit in registers are re-read from memory in each pass.
#pragma once

#include <string_view>

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// Fills name, source, row_len, vec, kind (a RowReduction), ops and ir_nodes of a KernelStep for
// `fused` in `g`.
KernelStep generate_reduction_kernel(const ir::Graph& g, const ir::Node& fused);

// A block per rows_per_block rows of the output's `numel` elements, capped so huge tensors loop.
LaunchDims launch_dims(const RowReduction& r, const KernelStep& k, int64_t numel);

// The launch shape chosen for rows of `row_len` elements read `vec` at a time.
struct RowShape {
  int threads_per_row = 32;
  int rows_per_block = 1;
  int chunks = 1;       // vectors each thread handles per row
  bool cached = true;   // the row's inputs stay in registers across passes
};
RowShape choose_row_shape(int64_t row_len, int vec);

// The helpers every row kernel starts with: the cuda_fp16/bf16 includes, float conversions,
// mlpc_load/mlpc_store of N consecutive elements (16-byte accesses when they fill whole chunks)
// and warp-wide sum and max.
std::string_view row_kernel_prelude();

}  // namespace mlpc::codegen
