// Prints a graph in the .mlp text form. The printed IR is the test oracle (style.md #7):
// print -> parse -> print gives the same text.
#pragma once

#include <string>

#include "ir/graph.h"

namespace mlpc::ir {

std::string print(const Graph& g);

}  // namespace mlpc::ir
