#include "codegen/transposed_x_plan.h"

#include <algorithm>

#include "codegen/elementwise_producer.h"
#include "codegen/rewrite_site.h"

namespace mlpc::codegen {
namespace {

// The param holding `w` [n, k] transposed, [k, n]: found, or added to `plan`.
int transposed_param(Plan& plan, int w) {
  const auto found = std::find_if(plan.buffers.begin(), plan.buffers.end(),
                                  [&](const Buffer& b) { return b.transpose_of == w; });
  if (found != plan.buffers.end()) return static_cast<int>(found - plan.buffers.begin());
  const Buffer& wb = plan.buffers[static_cast<size_t>(w)];
  ir::TensorType t = wb.type;
  std::reverse(t.shape.dims.begin(), t.shape.dims.end());
  plan.buffers.push_back(
      {.name = wb.name + ".T", .type = t, .role = BufferRole::Param, .transpose_of = w});
  return static_cast<int>(plan.buffers.size()) - 1;
}

// Once x is transposed: the site where the GEMM at `i` also reads its weight transposed. The
// kernel at `producer` (writing x) is in both fragments: the GEMM's x comes from a step.
void try_transposed_w(Plan& plan, size_t i, size_t producer, const Lowering& lowering) {
  if (!lowering.looks_at(passes::ChoiceKind::TransposedW)) return;
  const auto& gemm = std::get<GemmStep>(plan.steps[i]);
  const Buffer& wb = plan.buffers[static_cast<size_t>(gemm.w)];
  if (!wb.uploaded() || wb.role != BufferRole::Param || wb.view_of >= 0 ||
      wb.type.shape.rank() != 2)
    return;
  Plan trial = plan;
  auto& rewritten = std::get<GemmStep>(trial.steps[i]);
  rewritten.w = transposed_param(trial, gemm.w);
  rewritten.w_transposed = true;
  const Step& kernel = plan.steps[producer];
  RewriteSite site{.kind = passes::ChoiceKind::TransposedW, .step = gemm.name,
                   .nodes = gemm.ir_nodes, .n = gemm.n, .k = gemm.k, .dtype = gemm.dtype,
                   .plan = &plan, .replaced = {kernel, gemm}};
  Step rewritten_step = rewritten;
  site.options.push_back({.impl = ir::Impl::CublasltXtWt, .trial = std::move(trial),
                          .rewritten = {kernel, std::move(rewritten_step)}});
  const bool take = lowering.pick(site).has_value();
  if (take) plan = std::move(*site.options.front().trial);
  lowering.record(plan, site, take);
}

}  // namespace

void apply_transposed_x(Plan& plan, const ir::Graph& g, const Lowering& lowering) {
  if (!lowering.looks_at(passes::ChoiceKind::TransposedX)) return;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto* gemm = std::get_if<GemmStep>(&plan.steps[i]);
    if (!gemm || gemm->dtype != ir::DType::F32 || gemm->tf32x3 || gemm->x_transposed ||
        gemm->row_stride > 0)
      continue;
    const auto producer = elementwise_producer(plan, g, gemm->x);
    if (!producer) continue;
    Plan trial = plan;
    const KernelStep k = regenerated(plan, g, *producer, {.store = Store::Transposed});
    trial.steps[producer->step] = k;
    auto& new_gemm = std::get<GemmStep>(trial.steps[i]);
    new_gemm.x_transposed = true;
    trial.buffers[static_cast<size_t>(gemm->x)].transposed = true;
    RewriteSite site{.kind = passes::ChoiceKind::TransposedX, .step = gemm->name,
                     .nodes = gemm->ir_nodes, .n = gemm->n, .k = gemm->k, .dtype = gemm->dtype,
                     .plan = &plan, .replaced = {plan.steps[producer->step], *gemm}};
    Step new_step = new_gemm;
    site.options.push_back({.impl = ir::Impl::CublasltXt, .trial = std::move(trial),
                            .rewritten = {k, std::move(new_step)}});
    const bool take = lowering.pick(site).has_value();
    if (take) plan = std::move(*site.options.front().trial);
    lowering.record(plan, site, take);
    if (take) try_transposed_w(plan, i, producer->step, lowering);
  }
}

}  // namespace mlpc::codegen
