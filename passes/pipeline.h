// The pass pipeline: straight-line code (style.md #3). The verifier runs after every pass that
// changed the graph; each pass is timed and the IR after it is kept when it changed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion_report.h"
#include "passes/fuse_epilogue.h"
#include "passes/merge_gemms.h"

namespace mlpc::passes {

struct PipelineOptions {
  bool fusion = true;     // false: eager, every pointwise op its own kernel
  bool epilogues = false;  // fold bias / relu / gelu_tanh / residual into GEMMs (with fusion)
  // Decides each sibling-GEMM merge (passes/merge_gemms.h); unset: the pass does not run.
  GemmMergeDecider merge_gemms;
  // Decides each legal epilogue fold (passes/fuse_epilogue.h); unset: every one is taken.
  EpilogueDecider epilogue_decider;
};

struct PassRecord {
  std::string pass;
  bool changed = false;
  double ms = 0.0;
  std::string ir;  // the printed IR after the pass (empty when it changed nothing)
};

struct PipelineResult {
  ir::Graph graph;
  std::string input_ir;
  std::vector<PassRecord> passes;
  FusionReport fusion;
};

PipelineResult run_pipeline(ir::Graph g, const PipelineOptions& options);

// Runs one more pass on `r.graph`, as the pipeline runs each: timed, verified when it changed
// the graph, its IR kept (compile() runs kernel selection so, after tuning). Returns `changed`.
bool run_pass(PipelineResult& r, const std::string& name,
              const std::function<bool(ir::Graph&)>& pass);

}  // namespace mlpc::passes
