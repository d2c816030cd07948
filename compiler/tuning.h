// The tuning step of -O2: measurement, kept apart from decision. It enumerates the
// kernel-selection candidates of a fused graph as data (codegen/candidates.h: each option a
// small plan fragment), times what the rules say is worth timing (passes/kernel_rules.h) in one
// batch on the GPU, and hands the times to kernel selection (passes/select_kernels.h), which
// reads nothing else. Every fragment's kernels start building at once, and each fragment is
// timed, inside a CUDA graph, as soon as its kernels are built: the baselines first (cuBLASLt
// steps and the kernels already there build quickly), so timing overlaps the longest builds.
// Times are cached on disk by content (kernel sources, GEMM tuning keys, rows), so a warm
// compile times nothing again.
#pragma once

#include <string>
#include <vector>

#include "codegen/candidates.h"
#include "codegen/plan.h"
#include "ir/graph.h"
#include "passes/kernel_candidate.h"
#include "passes/kernel_rules.h"

namespace mlpc {

struct TuningResult {
  std::vector<passes::KernelCandidate> candidates;  // with the times measured
  bool measured = false;  // a GPU timed what the options measure (else: no times at all)
  double build_wait_ms = 0;  // waiting for kernel builds (NVRTC) before a timing could start
  double timing_ms = 0;      // timing fragments on the GPU, their inputs included
};

// `o.measured` is ignored: the result says whether it measured. Without a measuring mode, or
// without a GPU, it enumerates only.
TuningResult tune_kernels(const ir::Graph& fused, const passes::SelectOptions& o, bool use_cache);

// Whether `o` measures anything on the GPU (a Measure mode the arch allows).
bool measures_kernels(const passes::SelectOptions& o);

// The steps whose kernels tune_kernels would build for `candidates` under `o`: what a compile
// can start building before its passes are done (compiler/speculative_builds.h).
std::vector<codegen::Step> steps_to_time(const std::vector<codegen::CandidateFragments>& candidates,
                                         const passes::SelectOptions& o);

}  // namespace mlpc
