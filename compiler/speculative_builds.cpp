#include "compiler/speculative_builds.h"

#include <exception>

#include "codegen/plan_builder.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"

namespace mlpc {

namespace {

// Whether compile() with `o` for `arch` times generated kernels in a decision.
bool measures_kernels(const CompileOptions& o, const std::string& arch) {
  return o.fusion && ((o.gated_gemms == GatedGemms::Measure && gated_gemms_run_on(arch)) ||
                      o.small_gemms == SmallGemms::Measure || o.fp32_gemms == Fp32Gemms::Measure ||
                      o.transposed_x == TransposedX::Measure);
}

// The steps of `g`'s plan with the merge decision fixed to `merge` and the measured plan
// decisions all taken (`taken`) or none.
std::vector<codegen::Step> plan_steps(const ir::Graph& g, const CompileOptions& o,
                                      const std::string& arch, int64_t rows, MergeGemms merge,
                                      bool taken) {
  passes::PipelineResult p = passes::run_pipeline(
      g, {.fusion = true, .epilogues = o.epilogues, .merge_gemms = merge_decider(merge, rows)});
  codegen::PlanOptions plan;
  if (taken) {
    if (o.small_gemms == SmallGemms::Measure)  // those the decider will measure
      plan.small_gemm_decider = [rows](const codegen::Plan&, const codegen::GemmStep& gemm,
                                       const std::vector<codegen::KernelStep>& kernels) {
        // The tensor-core kernel where its rows allow, else the CUDA-core one where it applies.
        for (size_t i = kernels.size(); i-- > 0;)
          if (small_gemm_candidate_timed(kernels[i], gemm, rows))
            return codegen::KernelChoice{true, "", i};
        return codegen::KernelChoice{false, ""};
      };
    if (o.gated_gemms == GatedGemms::Measure)
      plan.gated_gemm_decider = gated_gemm_decider(GatedGemms::On, rows, arch);
    if (o.fp32_gemms == Fp32Gemms::Measure)
      plan.tf32x3_decider = tf32x3_decider(Fp32Gemms::Tf32x3, rows);
    if (o.transposed_x == TransposedX::Measure)
      plan.transposed_x_decider = transposed_x_decider(TransposedX::On, rows);
  }
  return codegen::build_plan(p.graph, plan).steps;
}

}  // namespace

std::vector<std::vector<codegen::Step>> speculative_plans(const ir::Graph& g,
                                                         const CompileOptions& o,
                                                         const std::string& arch) {
  std::vector<std::vector<codegen::Step>> plans;
  if (!measures_kernels(o, arch)) return plans;
  const int64_t rows = decide_rows(o);
  std::vector<MergeGemms> merges = {o.merge_gemms};
  if (o.merge_gemms == MergeGemms::Measure) merges = {MergeGemms::On, MergeGemms::Off};
  for (MergeGemms merge : merges)
    for (bool taken : {true, false}) plans.push_back(plan_steps(g, o, arch, rows, merge, taken));
  return plans;
}

SpeculativeBuilds::SpeculativeBuilds(const ir::Graph& g, const CompileOptions& o,
                                     const std::string& arch) {
  if (!o.build_kernels || runtime::gpu_unavailable_reason()) return;  // nothing will be timed
  std::vector<std::vector<codegen::Step>> plans;
  try {
    plans = speculative_plans(g, o, arch);
  } catch (const std::exception&) {  // a graph the passes reject: compile() reports it
    return;
  }
  for (std::vector<codegen::Step>& steps : plans)
    builds_.push_back(std::async(std::launch::async,
                                 [steps = std::move(steps), arch, use_cache = o.use_cache] {
                                   runtime::build_kernels(steps, arch, use_cache);
                                 }));
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
