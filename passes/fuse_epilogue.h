// GEMM epilogue fusion: folds what cuBLASLt can apply before its store into the GEMM itself.
//   matmul + row-vector add        -> matmul_bias
//   matmul_bias + relu / gelu_tanh -> matmul_bias_relu / matmul_bias_gelu_tanh
//   matmul + full-size add         -> matmul_residual (the addend enters as C, beta = 1)
// Only a GEMM result with a single user is folded (otherwise the plain product is still needed).
// Exact GELU (erf) never rides the epilogue: cuBLASLt's GELU is the tanh approximation.
// Decisions go to `report` with the GEMM's step name as the group.
#pragma once

#include "ir/graph.h"
#include "passes/fusion_report.h"

namespace mlpc::passes {

bool fuse_epilogue(ir::Graph& g, FusionReport* report = nullptr);

}  // namespace mlpc::passes
