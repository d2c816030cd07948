#include "codegen/candidates.h"

#include "codegen/rewrite_site.h"

namespace mlpc::codegen {

std::vector<CandidateFragments> enumerate_candidates(const ir::Graph& g) {
  std::vector<CandidateFragments> out;
  Lowering noting;
  noting.active.fill(true);
  noting.pick = [&out](const RewriteSite& site) -> std::optional<size_t> {
    CandidateFragments c;
    c.candidate = {.kind = site.kind, .step = site.step, .nodes = site.nodes, .n = site.n,
                   .k = site.k, .dtype = site.dtype, .detail = site.detail,
                   .below_ieee = site.below_ieee};
    c.baseline = {*site.plan, site.replaced};
    for (const SiteOption& o : site.options) {
      c.candidate.options.push_back({.impl = o.impl});
      c.options.push_back({o.trial ? *o.trial : *site.plan, o.rewritten});
    }
    out.push_back(std::move(c));
    // x transposed is taken so that the w site after it is met: its fragments need x so.
    if (site.kind == passes::ChoiceKind::TransposedX && !site.options.empty()) return 0;
    return std::nullopt;
  };
  lower_plan(g, noting);
  return out;
}

}  // namespace mlpc::codegen
