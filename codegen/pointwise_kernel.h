// Turns one fused.pointwise region into a CUDA C++ kernel: fp32 math inside, loads and stores in
// the tensors' dtypes, 16-byte vector accesses when every operand allows them, a scalar tail.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// Fills name, source, row_len, vec, ops and ir_nodes of a KernelStep for `fused` in `g`.
KernelStep generate_pointwise_kernel(const ir::Graph& g, const ir::Node& fused);

}  // namespace mlpc::codegen
