// Pointwise fusion: maximal connected groups of pointwise ops over one iteration space (a row
// vector such as a bias broadcasts into it) become fused.pointwise regions, one kernel each.
// Fusion never crosses a GEMM. A producer that is also read outside its consumer's group is
// recomputed when that loads no more bytes than reading its stored value, else materialized.
// Every decision and its reason goes to `report`. Requires a verified graph.
#pragma once

#include <cstddef>

#include "ir/graph.h"
#include "passes/fusion_report.h"

namespace mlpc::passes {

// The most ops one region takes: past it NVRTC's build time grows faster than the region
// (docs/testing.md, "Limits"), so a longer chain becomes several kernels.
inline constexpr size_t kMaxRegionOps = 128;

bool fuse_pointwise(ir::Graph& g, FusionReport* report = nullptr);

// Eager mode: every pointwise op becomes its own region, so it runs as its own kernel and every
// intermediate goes through memory. Same codegen, no fusion.
bool isolate_pointwise(ir::Graph& g);

}  // namespace mlpc::passes
