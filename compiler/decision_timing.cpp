#include "compiler/decision_timing.h"

#include <chrono>
#include <memory>

#include "host/wall_clock.h"
#include "runtime/device/device.h"
#include "runtime/measure/gemm_bench.h"

namespace mlpc {
namespace {

// A round that still misses times after this many is decided by the rule for what it misses:
// each round can only ask for times a different earlier decision made relevant.
constexpr int kMaxRounds = 4;

}  // namespace

DecisionTimer gpu_decision_timer() {
  if (runtime::gpu_unavailable_reason()) return {};
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench](const DecisionTiming& t) {
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    runtime::GemmBench& b = **bench;
    return t.copy_bytes > 0 ? b.copy_us(t.copy_bytes)
                            : b.best_us(t.rows, t.n, t.k, t.dtype, t.epilogue);
  };
}

MeasuredPipeline run_measured_pipeline(const ir::Graph& g, passes::PipelineOptions options,
                                       MergeGemms merge, bool measure_epilogues, int64_t rows,
                                       const DecisionTimer& timer) {
  MeasuredPipeline m;
  DecisionTimes times;
  DecisionTimes* table = timer ? &times : nullptr;
  options.merge_gemms =
      options.fusion ? merge_decider(merge, rows, table) : passes::GemmMergeDecider{};
  options.epilogue_decider =
      measure_epilogues ? epilogue_decider(rows, table) : passes::EpilogueDecider{};
  for (;;) {
    times.missing.clear();
    m.result = passes::run_pipeline(g, options);
    ++m.rounds;
    if (times.missing.empty() || m.rounds == kMaxRounds) return m;
    const auto t0 = std::chrono::steady_clock::now();
    for (const DecisionTiming& t : times.missing) {
      times.us[t.key()] = timer(t);
      ++m.timed;
    }
    m.timing_ms += runtime::ms_since(t0);
  }
}

}  // namespace mlpc
