// Checks every invariant of a graph; the pipeline runs it after every pass. A violation throws
// mlpc::Error naming the node ("node %h (mul): ..."), prefixed with "FILE:LINE:COL: error: " when
// the node came from text and `file` is given.
#pragma once

#include <string_view>

#include "ir/graph.h"

namespace mlpc::ir {

void verify(const Graph& g, std::string_view file = {});

// [A-Za-z_][A-Za-z0-9_]*: what a fused region's kernel symbol must be (it names the CUDA kernel).
bool is_c_identifier(std::string_view s);

}  // namespace mlpc::ir
