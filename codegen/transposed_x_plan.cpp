#include "codegen/transposed_x_plan.h"

#include <algorithm>

#include "codegen/elementwise_producer.h"

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

// Once x is transposed: whether the GEMM at `i` also reads its weight transposed. The kernel at
// `producer` (writing x) is timed with it on both sides: the GEMM's x comes from a step.
void try_transposed_w(Plan& plan, size_t i, size_t producer, const TransposedXDecider& decider) {
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
  KernelChoice c = decider(plan, {kernel, gemm}, trial, {kernel, rewritten});
  StepChoice choice{gemm.name, c.use_kernel, std::move(c.why)};
  if (c.use_kernel) plan = std::move(trial);
  plan.choices.push_back(std::move(choice));
}

}  // namespace

void apply_transposed_x(Plan& plan, const ir::Graph& g, const TransposedXDecider& decider) {
  if (!decider) return;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto* gemm = std::get_if<GemmStep>(&plan.steps[i]);
    if (!gemm || gemm->dtype != ir::DType::F32 || gemm->tf32x3 || gemm->x_transposed ||
        gemm->row_stride > 0)
      continue;
    const auto producer = elementwise_producer(plan, g, gemm->x);
    if (!producer) continue;
    Plan trial = plan;
    const KernelStep k = regenerated(plan, g, *producer, {.store = Store::Transposed});
    const std::vector<Step> replaced{plan.steps[producer->step], *gemm};
    trial.steps[producer->step] = k;
    auto& new_gemm = std::get<GemmStep>(trial.steps[i]);
    new_gemm.x_transposed = true;
    trial.buffers[static_cast<size_t>(gemm->x)].transposed = true;
    KernelChoice c = decider(plan, replaced, trial, {k, new_gemm});
    StepChoice choice{gemm->name, c.use_kernel, std::move(c.why)};
    if (c.use_kernel) plan = std::move(trial);
    plan.choices.push_back(std::move(choice));
    if (c.use_kernel) try_transposed_w(plan, i, producer->step, decider);
  }
}

}  // namespace mlpc::codegen
