#include "compiler/compile.h"

#include <chrono>
#include <optional>

#include "codegen/plan_builder.h"
#include "compiler/logs.h"
#include "compiler/speculative_builds.h"
#include "runtime/jit/build_log.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"
#include "host/wall_clock.h"

namespace mlpc {
using Clock = std::chrono::steady_clock;
using runtime::ms_since;

CompiledGraph compile(const ir::Graph& g, const CompileOptions& options) {
  CompiledGraph c;
  const LogTopics logs = log_topics_from_env();  // an unknown topic fails before any work
  runtime::set_build_log(logs.builds);
  auto phase = Clock::now();
  c.arch = options.arch.empty() ? runtime::device_arch() : options.arch;
  // Builds, on other threads, the kernels -O2's measured decisions will ask for, while the GPU
  // measures the passes' decisions; waited for on the way out.
  SpeculativeBuilds ahead(g, options, c.arch);
  const int64_t rows = decide_rows(options);
  c.pipeline = passes::run_pipeline(
      g, {.fusion = options.fusion,
          .epilogues = options.epilogues,
          .merge_gemms = options.fusion ? merge_decider(options.merge_gemms, rows)
                                        : passes::GemmMergeDecider{},
          .epilogue_decider = epilogue_decider(options.measure_epilogues, rows)});
  c.passes_ms = ms_since(phase);
  phase = Clock::now();
  const DecisionCosts before = decision_costs();
  c.plan = codegen::build_plan(
      c.pipeline.graph,
      {.small_gemms = options.small_gemms == SmallGemms::On,
       .small_gemm_decider = small_gemm_decider(options.small_gemms, rows, options.use_cache),
       .gated_gemm_decider =
           gated_gemm_decider(options.gated_gemms, rows, c.arch, options.use_cache),
       .tf32x3_decider = tf32x3_decider(options.fp32_gemms, rows, options.use_cache),
       .transposed_x_decider =
           transposed_x_decider(options.transposed_x, rows, options.use_cache)});
  c.plan_ms = ms_since(phase);
  const DecisionCosts after = decision_costs();
  c.plan_build_wait_ms = after.build_wait_ms - before.build_wait_ms;
  c.plan_timing_ms = after.timing_ms - before.timing_ms;
  log_compile(c, logs);  // MLPC_LOGS: before NVRTC, so a kernel that fails to build is shown
  if (!options.build_kernels) return c;
  auto t0 = Clock::now();
  runtime::KernelBuilds built = runtime::build_kernels(c.plan.steps, c.arch, options.use_cache);
  c.cubins = std::move(built.cubins);
  c.cache_hits = built.hits;
  c.cache_misses = built.misses;
  c.nvrtc_ms = built.nvrtc_ms;
  c.cache_enabled = built.cache_enabled;
  c.compile_ms = ms_since(t0);
  return c;
}

}  // namespace mlpc
