// Row-reduction fusion: each row reduction becomes one fused.reduction kernel (a warp or a block
// per row) with its prologue (pointwise producers in its rows whose every user joins: casts,
// residual adds) and its epilogue (pointwise consumers in the same rows: normalize, scale by a
// weight, cast). Groups grow backward from their last node, latest producer first, as in
// fuse-pointwise; groups without a reduction or a per-row broadcast are left to fuse-pointwise.
// Runs before fuse-pointwise; every decision and its reason goes to `report`.
#pragma once

#include "ir/graph.h"
#include "passes/fusion_report.h"

namespace mlpc::passes {

bool fuse_reduction(ir::Graph& g, FusionReport* report = nullptr);

// Eager mode: each row reduction and each pointwise op that broadcasts a per-row value [.., 1]
// across a row becomes its own fused.reduction (the ops pointwise kernels cannot run).
bool isolate_reduction(ir::Graph& g);

// Whether `n` is a binary pointwise op reading a per-row value [.., 1] against a full row.
bool broadcasts_per_row(const ir::Graph& g, const ir::Node& n);

}  // namespace mlpc::passes
