// The node a fusion pass puts in place of a group: a fused.pointwise or fused.reduction whose
// body is a graph of the group's nodes, and whose operands are the values the group reads from
// outside (each a body input named as outside, in the order first read).
#pragma once

#include <set>
#include <string>

#include "passes/rebuild.h"

namespace mlpc::passes {

// `members`: indices of g's nodes, copied into the body in program order; `root`: the member the
// body returns. The node's operands are in `outer`'s ids.
ir::Node make_fused_region(const ir::Graph& g, ir::Op op, const std::set<uint32_t>& members,
                           uint32_t root, const std::string& symbol, const Rebuild& outer);

}  // namespace mlpc::passes
