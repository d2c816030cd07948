// Lowers rmsnorm, layernorm and softmax to primitives (casts, square, row reductions, rsqrt,
// per-row broadcasts), the way the PyTorch modules compute them: statistics in fp32, one rounding
// to the input dtype at the end. Runs first in the pipeline, so fusion sees through composites
// and eager mode runs every primitive as its own kernel. The result keeps the composite's name.
#pragma once

#include "ir/graph.h"

namespace mlpc::passes {

bool expand_composites(ir::Graph& g);

}  // namespace mlpc::passes
