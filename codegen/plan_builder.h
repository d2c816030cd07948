// Lowers a fused graph (after the pass pipeline) to a Plan: one buffer per value that lives in
// memory, one step per GEMM and per fused.pointwise region, in program order.
#pragma once

#include "codegen/plan.h"
#include "ir/graph.h"

namespace mlpc::codegen {

Plan build_plan(const ir::Graph& g);

}  // namespace mlpc::codegen
