// Checks every invariant of a graph; the pipeline runs it after every pass. A violation throws
// mlpc::Error naming the node ("node %h (mul): ..."), prefixed with "FILE:LINE:COL: error: " when
// the node came from text and `file` is given.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace mlpc::ir {

void verify(const Graph& g, std::string_view file = {});

}  // namespace mlpc::ir
