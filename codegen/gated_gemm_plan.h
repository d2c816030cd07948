// Finds gated GEMMs in a built plan and, where the decider says so, replaces them by one
// generated kernel (codegen/gated_gemm_kernel.h): a pointwise kernel whose only operands are
// the outputs of two plain GEMMs of the same input (gate and up), or the two halves of their
// merged GEMM, each read by nothing else. The GEMM steps and the kernel step become one step
// (named like the kernel it replaces); the intermediates between them leave the plan. Only GEMMs
// that are cuBLASLt steps are looked at: one a small-GEMM kernel already computes is not.
#pragma once

#include "codegen/plan_builder.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// `g` is the graph `plan` was built from. Records each decision in plan.choices.
void apply_gated_gemms(Plan& plan, const ir::Graph& g, const GatedGemmDecider& decider);

}  // namespace mlpc::codegen
