// GEMM epilogue fusion: folds what cuBLASLt can apply before its store into the GEMM itself.
//   matmul + row-vector add        -> matmul_bias
//   matmul_bias + relu / gelu_tanh -> matmul_bias_relu / matmul_bias_gelu_tanh
//   matmul + full-size add         -> matmul_residual (the addend enters as C, beta = 1)
// Only a GEMM result with a single user is folded (otherwise the plain product is still needed).
// Exact GELU (erf) never rides the epilogue: cuBLASLt's GELU is the tanh approximation.
// Decisions go to `report` with the GEMM's step name as the group.
#pragma once

#include <functional>
#include <string>

#include "ir/graph.h"
#include "passes/fusion_report.h"

namespace mlpc::passes {

// A legal fold, for a decider to weigh: the GEMM as it is (`from`) against the GEMM with the
// consumer folded in (`to`). When `removes_kernel`, the consumer is the last pointwise op on the
// GEMM's output, so not folding costs a kernel of its own; otherwise the consumer would join a
// fused kernel that runs anyway.
struct EpilogueCandidate {
  std::string gemm, consumer;  // value names
  ir::Op from = ir::Op::MatMul, to = ir::Op::MatMul;
  int64_t n = 0, k = 0;
  ir::DType dtype = ir::DType::F32;
  bool removes_kernel = false;
};

struct EpilogueDecision {
  bool fold = true;
  std::string reason;  // printed in the fusion report after the epilogue's name
};

// Unset: every legal fold is taken (the rule).
using EpilogueDecider = std::function<EpilogueDecision(const EpilogueCandidate&)>;

bool fuse_epilogue(ir::Graph& g, FusionReport* report = nullptr,
                   const EpilogueDecider& decide = {});

}  // namespace mlpc::passes
