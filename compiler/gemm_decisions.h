// The passes' compile-time choices made by measurement on the GPU: whether sibling GEMMs run
// merged, whether epilogues fold. Times come from runtime::GemmBench, tuned and cached on disk,
// so a second compile of the same shapes measures nothing again. (How each GEMM then runs is
// kernel selection's: compiler/tuning.h measures, passes/select_kernels.h decides.)
#pragma once

#include <cstdint>
#include <string>

#include "passes/kernel_rules.h"
#include "passes/fuse_epilogue.h"
#include "passes/merge_gemms.h"

namespace mlpc {

enum class MergeGemms { Off, On, Measure };
// How kernel selection chooses each kind of GEMM kernel (passes/kernel_rules.h).
using passes::Fp32Gemms;
using passes::FusedMlps;
using passes::GatedGemms;
using passes::SmallGemms;
using passes::TransposedX;

// A merge is taken when the merged GEMM is at least this much faster than the siblings apart:
// closer than that is noise on a shared GPU, and apart keeps the plan torch.compile's.
inline constexpr double kMergeMinGain = 0.01;

// The decider for `mode` at `rows` rows. Measure without a GPU keeps GEMMs apart (and says so).
passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows);

// Epilogue folds (-O2): with `measure` and a GPU, a fold is taken when the GEMM with the epilogue
// is no slower than the GEMM without it plus, when not folding leaves a kernel of its own, that
// kernel's memory traffic (a copy of the output); otherwise every legal fold is taken.
passes::EpilogueDecider epilogue_decider(bool measure, int64_t rows);

// Two timings of one tiny GEMM differ by a few percent from run to run (docs/benchmarks.md), so
// a fold that measures within this much of not folding is taken: it
// reads the bias once in the GEMM instead of in a kernel, and a bias fold is what lets a relu
// fold after it remove a launch (-O2 planned mlp3_small with 5 launches when noise said no).
inline constexpr double kEpilogueNoise = 0.03;

// The rule applied to measured times: fold when
// epilogue_us <= (plain_us + kernel_us) * (1 + kEpilogueNoise).
passes::EpilogueDecision decide_epilogue(double epilogue_us, double plain_us, double kernel_us,
                                         int64_t rows);

// The rule applied to measured times (no GPU): merged_us vs the siblings' separate times.
passes::GemmMergeDecision decide_merge(double merged_us, const std::vector<double>& apart_us,
                                       int64_t rows);

}  // namespace mlpc
