// The passes' compile-time choices made by measurement on the GPU: whether sibling GEMMs run
// merged, whether epilogues fold. The deciders handed to the passes read a table of times
// (DecisionTimes) and never call the runtime: what a decision asks for and does not find is
// recorded, timed in one batch by run_measured_pipeline (compiler/decision_timing.h), and the
// passes run again. (How each GEMM then runs is kernel selection's: compiler/tuning.h measures,
// passes/select_kernels.h decides.)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/graph.h"
#include "passes/fuse_epilogue.h"
#include "passes/kernel_rules.h"
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

// A time a merge or epilogue decision reads: one cuBLASLt GEMM with its best algorithm, or
// (copy_bytes > 0) a device copy of that many bytes, the memory traffic of a kernel of its own.
struct DecisionTiming {
  int64_t rows = 0, n = 0, k = 0;
  ir::DType dtype = ir::DType::F32;
  ir::GemmEpilogue epilogue;
  int64_t copy_bytes = 0;
  std::string key() const;
};

// The times the deciders read, by DecisionTiming::key, and what they asked for and did not find
// (each once): a decision without its times is made by the rule and marked for timing.
struct DecisionTimes {
  std::map<std::string, double> us;
  std::vector<DecisionTiming> missing;
  std::optional<double> find(const DecisionTiming& t);  // records a miss in `missing`
};

// The decider for `mode` at `rows` rows. Measure reads `times` (which must outlive it); Measure
// without a GPU (`times` null) keeps GEMMs apart, saying so.
passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows,
                                       DecisionTimes* times = nullptr);

// Epilogue folds (-O2): with `times`, a fold is taken when the GEMM with the epilogue is no slower
// than the GEMM without it plus, when not folding leaves a kernel of its own, that kernel's
// memory traffic (a copy of the output); null `times`: every legal fold is taken (the rule).
passes::EpilogueDecider epilogue_decider(int64_t rows, DecisionTimes* times);

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
