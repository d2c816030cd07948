// Dead-code elimination: drops every node the return does not depend on. Function inputs stay:
// they are the graph's signature. Returns whether anything was removed.
#pragma once

#include "ir/graph.h"

namespace mlpc::passes {

bool dce(ir::Graph& g);

}  // namespace mlpc::passes
