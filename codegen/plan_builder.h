// Lowers a fused graph (after the pass pipeline) to a Plan: one buffer per value that lives in
// memory, one step per GEMM and per fused.pointwise region, in program order.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

struct PlanOptions {
  // GEMMs with n a multiple of 32 and no residual as generated kernels
  // (codegen/small_gemm_kernel.h) instead of cuBLASLt calls: for GEMMs so small that cuBLASLt's
  // fixed cost is most of their time.
  bool small_gemms = false;
};

Plan build_plan(const ir::Graph& g, const PlanOptions& options = {});

}  // namespace mlpc::codegen
