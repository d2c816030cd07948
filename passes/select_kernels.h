// Kernel selection: the pass that sets each matmul's `impl` (ir/impl.h), and a gated region's,
// from the graph's candidates (passes/kernel_candidate.h) and their measured times, by the rules
// of passes/kernel_rules.h. The choices run in ChoiceKind's order, each over the GEMMs the ones
// before left: a fused MLP and then a gated pattern take their GEMMs, a GEMM a generated kernel
// takes is no f32 layout choice, and w is transposed only after x. A fused MLP's layers get
// `impl fused_mlp`; passes/fuse_mlp.h then makes them one fused.mlp region. Without times (no GPU) a measured choice keeps the
// steps as they are and says so. Every choice made is recorded with its reason and numbers.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "passes/kernel_candidate.h"
#include "passes/kernel_rules.h"

namespace mlpc::passes {

// Sets the impl of the nodes of each candidate taken; `records` (when given) receives a record
// per choice made, in the order made. Returns whether the graph changed.
bool select_kernels(ir::Graph& g, const std::vector<KernelCandidate>& candidates,
                    const SelectOptions& options, std::vector<KernelRecord>* records);

}  // namespace mlpc::passes
