// `--dtype`: the same graph with every tensor in another dtype (casts become casts to it).
#pragma once

#include "ir/graph.h"

namespace mlpc {

ir::Graph with_dtype(const ir::Graph& g, ir::DType dtype);

}  // namespace mlpc
