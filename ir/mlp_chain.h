// The rule of a fused.mlp region's body (ops.def): a chain of matmuls, the first reading input
// 0 (x), each later one the matmul before it and nothing else reading that; every weight and
// bias another body input; a residual only on the last matmul, and only x; the last returned.
// The verifier checks it, the fuse-mlp pass builds only such bodies, and codegen reads the
// chain's layers from it (codegen/fused_mlp_spec.h).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace mlpc::ir {

// The body's matmuls in chain order, or empty with the reason in `why_not`.
std::vector<NodeId> mlp_chain_layers(const Graph& body, std::string* why_not);

}  // namespace mlpc::ir
