// GEMM epilogue fusion: folds the pointwise ops a matmul's epilogue expresses,
// y = act(x . W^T + bias) + residual (ir::GemmEpilogue), into the matmul itself:
//   + row-vector add -> bias      (before any activation)
//   activation       -> act       (before any residual)
//   + full-size add  -> residual
// one consumer a round, so a chain folds over several rounds, bias or not. Only a GEMM result
// with a single user is folded (otherwise the plain product is still needed), and only into an
// epilogue cuBLASLt runs (passes/gemm_epilogue.h), as any GEMM may end up there: no exact GELU
// (cuBLASLt's is the tanh approximation), no silu, no activation with a residual. An activation
// followed by more pointwise work stays off a plain GEMM: it costs nothing in the fused kernel,
// and merge_gemms and the gated GEMM kernels take only plain GEMMs (GeGLU's gate).
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
  ir::GemmEpilogue from, to;
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
