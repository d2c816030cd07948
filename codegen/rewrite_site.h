// The places where a plan rewrite can apply, and how codegen is told which to take. Each
// rewrite (gated GEMMs, small GEMMs, 3xTF32, transposed x and w) finds its sites in the plan it
// is given and asks `Lowering::pick` which option to take: when building a plan, the one the IR's
// impl attributes name (passes/select_kernels.h decided them); when enumerating candidates
// (codegen/candidates.h), none, after noting what each option would make.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "passes/kernel_candidate.h"

namespace mlpc::codegen {

struct SiteOption {
  ir::Impl impl = ir::Impl::Auto;
  std::optional<Plan> trial;    // the plan with the rewrite made; none: the site's own plan
  std::vector<Step> rewritten;  // what replaces the site's steps there
};

struct RewriteSite {
  passes::ChoiceKind kind = passes::ChoiceKind::SmallGemm;
  std::string step;                // the record's name
  std::vector<std::string> nodes;  // the IR values it rewrites: matmuls, then a gated region
  int64_t n = 0, k = 0;
  ir::DType dtype = ir::DType::F32;
  const Plan* plan = nullptr;   // the plan as it is
  std::vector<Step> replaced;   // its steps that the rewrite replaces
  std::vector<SiteOption> options;
  std::string detail;       // as passes::KernelCandidate::detail
  bool below_ieee = false;  // as passes::KernelCandidate::below_ieee
};

struct Lowering {
  // The kinds of site it looks at: a rewrite skips any other kind's sites without making their
  // options (a graph nothing was selected on makes none).
  std::array<bool, passes::kChoiceKinds> active{};
  bool looks_at(passes::ChoiceKind kind) const { return active[static_cast<size_t>(kind)]; }
  // The option to take at a site, or none (the steps stay).
  std::function<std::optional<size_t>(const RewriteSite&)> pick;
  // Selection's records, copied into Plan::choices as each site is met (none: nothing noted).
  const std::vector<passes::KernelRecord>* records = nullptr;
  void record(Plan& plan, const RewriteSite& site, bool taken) const;
};

// The lowering the IR's impl attributes say: at each site, the option whose impl the site's
// nodes carry (an impl the site cannot lower is an error naming the node).
Lowering lowering_from_ir(const ir::Graph& g, const std::vector<passes::KernelRecord>* records);

// The plan of `g` with each rewrite site lowered as `lowering` picks (codegen/plan_builder.h's
// build_plan is this with lowering_from_ir).
Plan lower_plan(const ir::Graph& g, const Lowering& lowering);

// The rewrites, in the order lower_plan runs them (each over the plan the ones before left).
// `g` is the graph `plan` was built from.
void apply_gated_gemms(Plan& plan, const ir::Graph& g, const Lowering& lowering);
void apply_tf32x3(Plan& plan, const ir::Graph& g, const Lowering& lowering);
void apply_transposed_x(Plan& plan, const ir::Graph& g, const Lowering& lowering);

}  // namespace mlpc::codegen
