// Whole MLPs in one kernel (issue "Whole MLPs in one kernel"). After epilogue folding a narrow
// MLP is a chain of matmuls, each hidden value read once, by the next layer's x. This file finds
// those chains (what kernel selection's fused-MLP candidates are made of: codegen cuts each to
// what its kernel holds on chip) and, once selection has set `impl fused_mlp` on a chain's
// layers, makes them one fused.mlp region (ir/mlp_chain.h) that codegen lowers to one kernel.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace mlpc::passes {

struct MlpChain {
  std::vector<ir::NodeId> layers;  // matmuls, each reading the one before as its x
  std::string stop;                // why the chain ends after its last layer
};

// Every chain of two or more matmuls in `g`, in program order. A chain grows from a matmul to
// the matmul that reads it as x while that is its only reader, the dtype stays, the layer has
// no residual and the next one's residual (if any) is the chain's x.
std::vector<MlpChain> find_mlp_chains(const ir::Graph& g);

// The kernel symbol of the region of `layers` (its last layer's name as a C identifier; another
// fused region's symbol is never reused).
std::string fused_mlp_symbol(const ir::Graph& g, const std::vector<ir::NodeId>& layers);

// The fuse-mlp pass: each run of consecutive layers of a chain that carry `impl fused_mlp`
// becomes a fused.mlp region with that impl. Returns whether the graph changed.
bool fuse_mlp(ir::Graph& g);

}  // namespace mlpc::passes
