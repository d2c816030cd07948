// Whole MLPs in one kernel (issue "Whole MLPs in one kernel"). After epilogue folding a narrow
// MLP is a chain of layers, each hidden value read once, by the next layer's x. A layer is a
// matmul, or a matmul and the fused.pointwise region finishing its epilogue where fuse-epilogue
// left one (a bias add and an activation cuBLASLt has no epilogue for, such as silu or exact
// gelu). This file finds those chains (what kernel selection's fused-MLP candidates are made of:
// codegen cuts each to what its kernel holds on chip) and, once selection has set `impl
// fused_mlp` on a chain's matmuls, makes them one fused.mlp region (ir/mlp_chain.h), each
// layer's whole epilogue on its matmul, which codegen lowers to one kernel.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace mlpc::passes {

struct MlpLayer {
  ir::NodeId matmul;
  ir::NodeId output;               // the value the layer yields: the matmul or its tail region
  ir::GemmEpilogue epilogue;       // the matmul's and the tail's together
  std::optional<ir::NodeId> bias;  // the bias param, from whichever node adds it
};

struct MlpChain {
  std::vector<MlpLayer> layers;  // each reading the one before as its x
  std::string stop;              // why the chain ends after its last layer
};

// Every chain of two or more layers in `g`, in program order. A chain grows from a layer to the
// matmul that reads its output as x while that is the output's only reader, the dtype stays, the
// layer has no residual and the next one's residual (if any) is the chain's x.
std::vector<MlpChain> find_mlp_chains(const ir::Graph& g);

// `matmuls` of `g` as layers without tails (a fused.mlp region's body).
std::vector<MlpLayer> plain_layers(const ir::Graph& g, const std::vector<ir::NodeId>& matmuls);

// The kernel symbol of the region of `layers` (its last output's name as a C identifier; another
// fused region's symbol is never reused).
std::string fused_mlp_symbol(const ir::Graph& g, const std::vector<MlpLayer>& layers);

// The fuse-mlp pass: each run of two or more consecutive layers of a chain whose matmuls carry
// `impl fused_mlp` becomes a fused.mlp region with that impl. Returns whether the graph changed.
bool fuse_mlp(ir::Graph& g);

}  // namespace mlpc::passes
