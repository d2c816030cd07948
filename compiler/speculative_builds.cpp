#include "compiler/speculative_builds.h"

#include <exception>
#include <set>
#include <utility>

#include "codegen/candidates.h"
#include "compiler/tuning.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"

namespace mlpc {

std::vector<codegen::KernelStep> speculative_kernels(const ir::Graph& g, const CompileOptions& o,
                                                     const std::string& arch) {
  std::vector<codegen::KernelStep> kernels;
  const passes::SelectOptions select = select_options(o, arch);
  if (!o.fusion || !measures_kernels(select)) return kernels;
  std::vector<MergeGemms> merges = {o.merge_gemms};
  if (o.merge_gemms == MergeGemms::Measure) merges = {MergeGemms::On, MergeGemms::Off};
  std::set<std::pair<std::string, std::string>> seen;  // (symbol, source)
  for (MergeGemms merge : merges) {
    // The epilogues fold by the rule: the measured folds mostly agree, and a kernel built for
    // nothing costs a thread, not the compile.
    const passes::PipelineResult p = passes::run_pipeline(
        g, {.fusion = true,
            .epilogues = o.epilogues,
            .merge_gemms = merge_decider(merge, decide_rows(o))});
    for (const codegen::Step& s : steps_to_time(codegen::enumerate_candidates(p.graph), select))
      if (const auto* k = std::get_if<codegen::KernelStep>(&s);
          k && seen.emplace(k->cubin_symbol(), k->source).second)
        kernels.push_back(*k);
  }
  return kernels;
}

SpeculativeBuilds::SpeculativeBuilds(const ir::Graph& g, const CompileOptions& o,
                                     const std::string& arch) {
  if (!o.build_kernels || runtime::gpu_unavailable_reason()) return;  // nothing will be timed
  std::vector<codegen::KernelStep> kernels;
  try {
    kernels = speculative_kernels(g, o, arch);
  } catch (const std::exception&) {  // a graph the passes reject: compile() reports it
    return;
  }
  for (codegen::KernelStep& k : kernels)
    builds_.push_back(std::async(std::launch::async,
                                 [k = std::move(k), arch, use_cache = o.use_cache] {
                                   runtime::build_kernels({k}, arch, use_cache);
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
