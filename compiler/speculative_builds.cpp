#include "compiler/speculative_builds.h"

#include <exception>

#include "codegen/candidates.h"
#include "compiler/tuning.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"

namespace mlpc {

std::vector<std::vector<codegen::Step>> speculative_plans(const ir::Graph& g,
                                                         const CompileOptions& o,
                                                         const std::string& arch) {
  std::vector<std::vector<codegen::Step>> plans;
  const passes::SelectOptions select = select_options(o, arch);
  if (!o.fusion || !measures_kernels(select)) return plans;
  std::vector<MergeGemms> merges = {o.merge_gemms};
  if (o.merge_gemms == MergeGemms::Measure) merges = {MergeGemms::On, MergeGemms::Off};
  for (MergeGemms merge : merges) {
    // The epilogues fold by the rule: the measured folds mostly agree, and a kernel built for
    // nothing costs a thread, not the compile.
    const passes::PipelineResult p = passes::run_pipeline(
        g, {.fusion = true,
            .epilogues = o.epilogues,
            .merge_gemms = merge_decider(merge, decide_rows(o))});
    std::vector<codegen::Step> steps =
        steps_to_time(codegen::enumerate_candidates(p.graph), select);
    if (!steps.empty()) plans.push_back(std::move(steps));
  }
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
