#include "compiler/compile.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/plan_builder.h"
#include "compiler/logs.h"
#include "runtime/device.h"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"

namespace mlpc {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

CompiledGraph compile(const ir::Graph& g, const CompileOptions& options) {
  CompiledGraph c;
  const int64_t rows = options.decide_rows > 0 ? options.decide_rows : kDefaultDecideRows;
  c.pipeline = passes::run_pipeline(
      g, {.fusion = options.fusion,
          .epilogues = options.epilogues,
          .merge_gemms = options.fusion ? merge_decider(options.merge_gemms, rows)
                                        : passes::GemmMergeDecider{},
          .epilogue_decider = epilogue_decider(options.measure_epilogues, rows)});
  c.plan = codegen::build_plan(
      c.pipeline.graph, {.small_gemms = options.small_gemms == SmallGemms::On,
                         .small_gemm_decider = small_gemm_decider(options.small_gemms, rows)});
  log_compile(c);  // MLPC_LOGS: before NVRTC, so a kernel that fails to build is shown
  c.arch = options.arch.empty() ? runtime::device_arch() : options.arch;
  if (!options.build_kernels) return c;
  auto t0 = Clock::now();

  // Everything but the source that goes into a cache key, computed once per compile. When any of
  // it cannot be had (no CUDA include dir), skip the cache: compile_to_cubin reports the error.
  std::optional<runtime::KernelCache> cache;
  std::string key_options, key_version;
  if (options.use_cache && !runtime::kernel_cache_disabled_by_env()) {
    try {
      key_options = fmt::format("{}", fmt::join(runtime::nvrtc_options(c.arch), "\n"));
      key_version = runtime::nvrtc_version();
      cache.emplace();
      if (!cache->enabled()) cache.reset();
    } catch (const std::exception&) {
      cache.reset();
    }
  }
  c.cache_enabled = cache.has_value();

  for (const codegen::Step& s : c.plan.steps) {
    auto* k = std::get_if<codegen::KernelStep>(&s);
    if (!k) continue;
    std::string key;
    if (cache) {
      key = runtime::kernel_cache_key(k->source, key_options, c.arch, key_version);
      if (std::optional<std::vector<char>> hit = cache->load(key)) {
        c.cubins[k->name] = std::move(*hit);
        ++c.cache_hits;
        continue;
      }
    }
    auto t_nvrtc = Clock::now();
    std::vector<char> cubin = runtime::compile_to_cubin(k->source, k->name, c.arch);
    c.nvrtc_ms += ms_since(t_nvrtc);
    ++c.cache_misses;
    if (cache) cache->store(key, cubin);
    c.cubins[k->name] = std::move(cubin);
  }
  c.compile_ms = ms_since(t0);
  return c;
}

}  // namespace mlpc
