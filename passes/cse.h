// Common-subexpression elimination: two nodes with the same op, operands and attributes compute
// the same value, so later uses read the first. Sources and fused regions are never merged.
#pragma once

#include "ir/graph.h"

namespace mlpc::passes {

bool cse(ir::Graph& g);

}  // namespace mlpc::passes
