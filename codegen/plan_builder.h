// Lowers a fused graph (after the pass pipeline) to a Plan: one buffer per value that lives in
// memory, one step per GEMM and per fused.pointwise region, in program order.
#pragma once

#include <vector>

#include "codegen/plan.h"
#include "ir/graph.h"
#include "passes/kernel_candidate.h"

namespace mlpc::codegen {

struct PlanOptions {
  // Kernel selection's records (passes/select_kernels.h), copied into Plan::choices as each
  // rewrite site they name is met; none: the plan notes no choices.
  const std::vector<passes::KernelRecord>* records = nullptr;
};

// Lowers `g` as its impl attributes say (ir/impl.h): a matmul without one is a cuBLASLt call.
Plan build_plan(const ir::Graph& g, const PlanOptions& options = {});

}  // namespace mlpc::codegen
