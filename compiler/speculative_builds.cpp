#include "compiler/speculative_builds.h"

#include <exception>

#include "codegen/plan_builder.h"
#include "runtime/device.h"
#include "runtime/kernel_builds.h"

namespace mlpc {

bool worth_speculating(const CompileOptions& o, const std::string& arch) {
  const bool hopper = arch == "sm_90" || arch == "sm_90a";
  const bool measures_kernels = (o.gated_gemms == GatedGemms::Measure && hopper) ||
                                o.small_gemms == SmallGemms::Measure ||
                                o.fp32_gemms == Fp32Gemms::Measure;
  return o.fusion && o.build_kernels && measures_kernels && !runtime::gpu_unavailable_reason();
}

SpeculativeBuilds::SpeculativeBuilds(const ir::Graph& g, const CompileOptions& o,
                                     const std::string& arch) {
  if (!worth_speculating(o, arch)) return;
  const int64_t rows = o.decide_rows > 0 ? o.decide_rows : kDefaultDecideRows;
  std::vector<MergeGemms> merges = {o.merge_gemms};
  if (o.merge_gemms == MergeGemms::Measure) merges = {MergeGemms::On, MergeGemms::Off};
  for (MergeGemms merge : merges)
    for (bool taken : {true, false}) {
      // Passes and plan without a GPU measurement: each decision fixed (a few ms of CPU).
      passes::PipelineResult p = passes::run_pipeline(
          g, {.fusion = true, .epilogues = o.epilogues, .merge_gemms = merge_decider(merge, rows)});
      codegen::PlanOptions plan;
      if (taken) {
        if (o.small_gemms == SmallGemms::Measure)  // those the decider will measure
          plan.small_gemm_decider = [rows](const codegen::Plan&, const codegen::GemmStep& gemm,
                                           const codegen::KernelStep&) {
            return codegen::KernelChoice{rows * gemm.n * gemm.k <= kSmallGemmMaxMacs, ""};
          };
        if (o.gated_gemms == GatedGemms::Measure)
          plan.gated_gemm_decider = gated_gemm_decider(GatedGemms::On, rows, arch);
        if (o.fp32_gemms == Fp32Gemms::Measure)
          plan.tf32x3_decider = tf32x3_decider(Fp32Gemms::Tf32x3, rows);
      }
      std::vector<codegen::Step> steps = codegen::build_plan(p.graph, plan).steps;
      const bool use_cache = o.use_cache;
      builds_.push_back(std::async(std::launch::async, [steps = std::move(steps), arch, use_cache] {
        runtime::build_kernels(steps, arch, use_cache);
      }));
    }
}

SpeculativeBuilds::~SpeculativeBuilds() {
  for (std::future<void>& b : builds_) {
    try {
      b.get();
    } catch (const std::exception&) {  // dropped: see the header
    }
  }
}

}  // namespace mlpc
