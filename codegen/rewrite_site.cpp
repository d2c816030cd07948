#include "codegen/rewrite_site.h"

#include <fmt/format.h>

#include <map>

#include "ir/error.h"

namespace mlpc::codegen {

void Lowering::record(Plan& plan, const RewriteSite& site, bool taken) const {
  if (!records) return;
  for (const passes::KernelRecord& r : *records)
    if (r.kind == site.kind && r.step == site.step) {
      plan.choices.push_back({site.step, taken, r.why});
      return;
    }
}

Lowering lowering_from_ir(const ir::Graph& g, const std::vector<passes::KernelRecord>* records) {
  auto impl = std::make_shared<std::map<std::string, ir::Impl>>();
  for (const ir::Node& n : g.nodes)
    if (n.impl != ir::Impl::Auto) (*impl)[n.name] = n.impl;
  Lowering l;
  l.records = records;
  auto activate = [&l](passes::ChoiceKind kind) { l.active[static_cast<size_t>(kind)] = true; };
  for (const auto& [name, i] : *impl)
    if (auto kind = passes::choice_kind(i)) {
      activate(*kind);
      if (*kind == passes::ChoiceKind::TransposedW) activate(passes::ChoiceKind::TransposedX);
    }
  if (records)
    for (const passes::KernelRecord& r : *records) activate(r.kind);
  l.pick = [impl](const RewriteSite& site) -> std::optional<size_t> {
    // A gated site is named by its region (last); every other by its one matmul.
    const std::string& node = site.nodes.back();
    auto it = impl->find(node);
    if (it == impl->end()) return std::nullopt;
    ir::Impl want = it->second;
    // x transposed is the first step of x and w transposed.
    if (site.kind == passes::ChoiceKind::TransposedX && want == ir::Impl::CublasltXtWt)
      want = ir::Impl::CublasltXt;
    const bool mine = passes::choice_kind(want) == site.kind;
    if (!mine) return std::nullopt;
    for (size_t i = 0; i < site.options.size(); ++i)
      if (site.options[i].impl == want) return i;
    throw Error(fmt::format("node %{}: impl {} cannot be lowered here ({})", node,
                            ir::impl_name(want),
                            site.detail.empty() ? "no such kernel for its shape" : site.detail));
  };
  return l;
}

}  // namespace mlpc::codegen
