// Finds gated GEMMs in a built plan and, where the lowering picks it, replaces them by one
// generated kernel (codegen/gated_gemm_kernel.h): a pointwise kernel whose only operands are
// the outputs of two plain GEMMs of the same input (gate and up), or the two halves of their
// merged GEMM, each read by nothing else. The GEMM steps and the kernel step become one step
// (named like the kernel it replaces); the intermediates between them leave the plan. Only GEMMs
// that are cuBLASLt steps are looked at: one a small-GEMM kernel already computes is not.
#pragma once

#include <string>

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// The device function(s) a gated kernel's combine calls for `op`: mlpc_gelu_tanh and mlpc_silu
// in their fast forms (exp2 and reciprocal on the special-function unit), any other op's as the
// pointwise kernels have it (codegen/cuda_ops.h).
std::string gated_combine_helper(ir::Op op);

// The rewrite itself is codegen/rewrite_site.h's apply_gated_gemms.

}  // namespace mlpc::codegen
