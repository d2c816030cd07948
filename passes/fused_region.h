// The node a fusion pass puts in place of a group: a fused.pointwise or fused.reduction whose
// body is a graph of the group's nodes, and whose operands are the values the group reads from
// outside (each a body input named as outside, in the order first read).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "passes/rebuild.h"

namespace mlpc::passes {

// `members`: indices of g's nodes, copied into the body in program order; `root`: the member the
// body returns. The node's operands are in `outer`'s ids.
ir::Node make_fused_region(const ir::Graph& g, ir::Op op, const std::set<uint32_t>& members,
                           uint32_t root, const std::string& symbol, const Rebuild& outer);

// The walk both fusion passes grow a group by: each producer reachable from `root` once, as a
// (producer, consumer) pair, latest producer first in program order, so that when a producer is
// considered every user of it that could join the group has been decided already.
// `visit(producer, consumer)` returns true when the producer joined the group; its operands are
// then walked too.
void walk_producers(const ir::Graph& g, uint32_t root,
                    const std::function<bool(uint32_t producer, uint32_t consumer)>& visit);

}  // namespace mlpc::passes
