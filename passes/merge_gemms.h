// Merging sibling GEMMs: plain matmuls that read the same x with param weights, e.g. the gate and
// up projections of a GeGLU, become one matmul over their weights stacked once at load time
// (`concat`); each original value becomes a `slice` of the merged output, which fusion folds
// into the consuming kernel's loads. One wide GEMM can fill the GPU better than two narrow ones,
// or worse (anchors.md: faster at the article's size, slower at Llama-8B's), so every candidate
// goes through a decision, measured on the GPU by compiler/gemm_decisions.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "passes/fusion_report.h"

namespace mlpc::passes {

struct GemmMergeCandidate {
  std::string x;                   // the shared input value
  std::vector<std::string> gemms;  // the sibling matmuls' values, in program order
  std::vector<std::string> weights;
  std::vector<int64_t> n;  // each sibling's output width
  int64_t k = 0;
  ir::DType dtype = ir::DType::F32;
  std::string merged_name() const;  // "gate_up" for gemms {gate, up}
};

struct GemmMergeDecision {
  bool merge = false;
  std::string reason;  // printed in the fusion report
};

using GemmMergeDecider = std::function<GemmMergeDecision(const GemmMergeCandidate&)>;

// The candidates of `g`, in program order of their first GEMM.
std::vector<GemmMergeCandidate> gemm_merge_candidates(const ir::Graph& g);

// Merges every candidate `decide` accepts; records each decision in `report` (group
// "gemm_<merged name>"). Returns whether the graph changed.
bool merge_gemms(ir::Graph& g, const GemmMergeDecider& decide, FusionReport* report);

}  // namespace mlpc::passes
