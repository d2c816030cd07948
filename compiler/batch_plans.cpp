#include "compiler/batch_plans.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "dump/report.h"
#include "ir/error.h"

namespace mlpc {

size_t BatchPlans::index_for(int64_t batch) const {
  if (plans.empty()) throw Error("no plan compiled: compile_for_batches first");
  // Plans may interleave (1 and 8192 alike, 16 apart), so every size asked for is looked at.
  size_t fitting = plans.size(), largest = 0;
  int64_t fitting_at = 0, largest_at = 0;
  for (size_t i = 0; i < plans.size(); ++i)
    for (int64_t at : plans[i].decided_at) {
      if (at >= batch && (fitting == plans.size() || at < fitting_at)) fitting = i, fitting_at = at;
      if (at > largest_at) largest = i, largest_at = at;
    }
  return fitting < plans.size() ? fitting : largest;
}

bool decisions_depend_on_rows(const CompileOptions& o) {
  if (!o.fusion) return false;  // eager: no decision at all
  return o.merge_gemms == MergeGemms::Measure || o.small_gemms == SmallGemms::Measure ||
         o.gated_gemms == GatedGemms::Measure || o.fp32_gemms == Fp32Gemms::Measure ||
         o.transposed_x == TransposedX::Measure || o.fused_mlps == FusedMlps::Measure ||
         (o.epilogues && o.measure_epilogues);
}

std::string plan_signature(const CompiledGraph& c) {
  // The steps as plan_text lists them (kind, name, ops, layouts, bytes at one row), then each
  // generated kernel's source: two plans alike in both launch the same work.
  std::string sig = plan_text(c, 1);
  for (const codegen::Step& s : c.plan.steps)
    if (const auto* k = std::get_if<codegen::KernelStep>(&s)) sig += k->name + "\n" + k->source;
  return sig;
}

BatchPlans compile_for_batches(const ir::Graph& g, const CompileOptions& options,
                               std::vector<int64_t> batches, const CompileFn& compile_one) {
  if (batches.empty()) throw Error("compile_for_batches: no batch size given");
  for (int64_t b : batches)
    if (b <= 0) throw Error(fmt::format("batch size {} must be positive", b));
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  BatchPlans out;
  if (!decisions_depend_on_rows(options)) {
    CompileOptions o = options;
    o.decide_rows = batches.back();
    out.plans.push_back({batches, compile_one(g, o)});
    return out;
  }
  std::vector<std::string> signatures;
  for (int64_t b : batches) {
    CompileOptions o = options;
    o.decide_rows = b;
    CompiledGraph c = compile_one(g, o);
    std::string sig = plan_signature(c);
    auto same = std::find(signatures.begin(), signatures.end(), sig);
    if (same != signatures.end()) {
      out.plans[static_cast<size_t>(same - signatures.begin())].decided_at.push_back(b);
      continue;
    }
    signatures.push_back(std::move(sig));
    out.plans.push_back({{b}, std::move(c)});
  }
  return out;
}

std::string describe_decided_at(const std::vector<int64_t>& decided_at) {
  return fmt::format("decided at {} row{}", fmt::join(decided_at, ", "),
                     decided_at.size() == 1 && decided_at[0] == 1 ? "" : "s");
}

}  // namespace mlpc
