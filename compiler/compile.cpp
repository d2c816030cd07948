#include "compiler/compile.h"

#include <chrono>
#include <optional>

#include "codegen/plan_builder.h"
#include "compiler/decision_timing.h"
#include "compiler/logs.h"
#include "compiler/speculative_builds.h"
#include "compiler/tuning.h"
#include "passes/fuse_mlp.h"
#include "passes/select_kernels.h"
#include "runtime/jit/build_log.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"
#include "host/wall_clock.h"

namespace mlpc {
using Clock = std::chrono::steady_clock;
using runtime::ms_since;

passes::SelectOptions select_options(const CompileOptions& o, const std::string& arch) {
  return {.fused_mlps = o.fused_mlps,
          .small_gemms = o.small_gemms,
          .gated_gemms = o.gated_gemms,
          .fp32_gemms = o.fp32_gemms,
          .transposed_x = o.transposed_x,
          .rows = decide_rows(o),
          .arch = arch};
}

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
  MeasuredPipeline measured =
      run_measured_pipeline(g, {.fusion = options.fusion, .epilogues = options.epilogues},
                            options.merge_gemms, options.measure_epilogues, rows,
                            gpu_decision_timer());
  c.pipeline = std::move(measured.result);
  c.passes_timing_ms = measured.timing_ms;
  c.passes_ms = ms_since(phase);
  phase = Clock::now();
  // Kernel selection: the tuning step measures, the pass decides, codegen lowers what it says.
  passes::SelectOptions select = select_options(options, c.arch);
  std::vector<passes::KernelRecord> records;
  if (select.any()) {
    const TuningResult tuned = tune_kernels(c.pipeline.graph, select, options.use_cache);
    select.measured = tuned.measured;
    c.plan_build_wait_ms = tuned.build_wait_ms;
    c.plan_timing_ms = tuned.timing_ms;
    passes::run_pass(c.pipeline, "select-kernels", [&](ir::Graph& x) {
      return passes::select_kernels(x, tuned.candidates, select, &records);
    });
    passes::run_pass(c.pipeline, "fuse-mlp", passes::fuse_mlp);
  }
  c.plan = codegen::build_plan(c.pipeline.graph, {.records = &records});
  c.plan_ms = ms_since(phase);
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
