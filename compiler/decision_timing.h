// The passes' measured decisions (sibling-GEMM merges, epilogue folds) as data: the pipeline runs
// with deciders that read a table of times (compiler/gemm_decisions.h); every time they asked for
// and did not find is measured in one batch on the GPU (runtime::GemmBench: cuBLASLt tuned
// within its budget and cached on disk, so a warm compile times nothing), and the pipeline runs
// again on the fuller table, until a run asks for nothing new. No pass calls into the runtime.
#pragma once

#include <cstdint>
#include <functional>

#include "compiler/gemm_decisions.h"
#include "ir/graph.h"
#include "passes/pipeline.h"

namespace mlpc {

struct MeasuredPipeline {
  passes::PipelineResult result;
  int rounds = 0;         // pipeline runs
  int timed = 0;          // times measured (GEMMs and copies; on the GPU, cached ones too)
  double timing_ms = 0;   // wall time of measuring them
};

// Measures one time a decision reads (µs); what the GPU does, or a test's synthetic times.
using DecisionTimer = std::function<double(const DecisionTiming&)>;

// The GPU's timer (runtime::GemmBench, made on its first call); null without a usable GPU.
DecisionTimer gpu_decision_timer();

// `options.merge_gemms` and `options.epilogue_decider` are set here: merges by `merge` (Measure
// reads measured times), folds measured when `measure_epilogues` (else every legal one). With a
// null `timer` (no GPU), Measure keeps GEMMs apart and every legal fold is taken, as the rules
// say.
MeasuredPipeline run_measured_pipeline(const ir::Graph& g, passes::PipelineOptions options,
                                       MergeGemms merge, bool measure_epilogues, int64_t rows,
                                       const DecisionTimer& timer);

}  // namespace mlpc
