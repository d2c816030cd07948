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

// Fills name, source, row_len, vec, ops and ir_nodes of a KernelStep for `fused` in `g`.
KernelStep generate_pointwise_kernel(const ir::Graph& g, const ir::Node& fused);

}  // namespace mlpc::codegen
