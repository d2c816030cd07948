// Turns one fused.pointwise region into a CUDA C++ kernel: fp32 math inside, loads and stores in
// the tensors' dtypes, 16-byte vector accesses when every operand allows them, a scalar tail.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// The statements of a region's per-element function: one fp32 `const float` per op of `body`,
// then `return` of its result. Each input and slice of the body is read as the variable
// element_var(its name), which the caller declares (as a parameter, say).
std::string element_body(const ir::Graph& body);
std::string element_var(const std::string& ir_name);

struct PointwiseOptions {
  // How the result is stored (codegen/kernel_kinds.h). Store::Tf32x3Split: each f32 result as
  // its three TF32 parts into a [rows, 3 * row_len] buffer (codegen/tf32x3.h), so the kernel
  // feeds a 3xTF32 GEMM directly; its `n` counts that buffer's elements, three per element of
  // the space. Store::Transposed: as [row_len, rows] (codegen/transposed_x_plan.h), for a GEMM
  // that reads its x so; a block turns tiles of `transposed_tile` around in shared memory.
  Store store = Store::RowMajor;
  // The K-chunk of the split layout (divides the row; 0: the whole row, one chunk).
  int64_t tf32x3_chunk = 0;
  TransposeTile transposed_tile = kTransposeTile;
};

// Fills name, source, row_len, vec, kind, ops and ir_nodes of a KernelStep for `fused` in `g`.
KernelStep generate_pointwise_kernel(const ir::Graph& g, const ir::Node& fused,
                                     const PointwiseOptions& options = {});

// Grid-stride launch: enough blocks of 256 threads to cover the `numel` output elements of `k`
// once (a block per tile of a transposed store), capped so huge tensors loop.
LaunchDims launch_dims(const Elementwise& e, const KernelStep& k, int64_t numel);

}  // namespace mlpc::codegen
