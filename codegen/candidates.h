// The kernel-selection candidates of a graph, each with the plan fragments its options make:
// what the tuning step (compiler/tuning.h) times and kernel selection (passes/select_kernels.h)
// decides over. Found by lowering the graph once with every rewrite site noted and none taken
// (but x transposed, so that each GEMM's w site is seen), so a candidate's fragments are the
// steps the plan would run either way.
#pragma once

#include <vector>

#include "codegen/plan.h"
#include "ir/graph.h"
#include "passes/kernel_candidate.h"

namespace mlpc::codegen {

// Some steps of a plan, timed on that plan's buffers.
struct Fragment {
  Plan plan;
  std::vector<Step> steps;
};

struct CandidateFragments {
  passes::KernelCandidate candidate;  // times not filled in
  Fragment baseline;                  // the steps as they are
  std::vector<Fragment> options;      // candidate.options[i]'s
};

std::vector<CandidateFragments> enumerate_candidates(const ir::Graph& g);

}  // namespace mlpc::codegen
