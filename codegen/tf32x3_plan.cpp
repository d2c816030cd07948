#include "codegen/tf32x3_plan.h"
#include "ir/identifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include "codegen/cuda_ops.h"
#include "codegen/elementwise_producer.h"
#include "codegen/pointwise_kernel.h"
#include "codegen/rewrite_site.h"
#include "codegen/tf32x3.h"
#include "ir/error.h"

namespace mlpc::codegen {
namespace {

constexpr const char* kSuffix = ".tf32x3";

ir::TensorType tripled(ir::TensorType t) {
  t.shape.dims.back() *= 3;
  return t;
}

int add_buffer(Plan& plan, Buffer b) {
  plan.buffers.push_back(std::move(b));
  return static_cast<int>(plan.buffers.size()) - 1;
}

// A kernel that only splits x into x3: the pointwise generator over an identity region.
KernelStep split_kernel(const Plan& plan, const ir::Graph& g, int x, int x3, int64_t chunk) {
  const Buffer& xb = plan.buffers[static_cast<size_t>(x)];
  auto body = std::make_shared<ir::Graph>();
  body->name = g.name;
  body->batch_symbol = g.batch_symbol;
  body->nodes.push_back({.op = ir::Op::Input, .name = xb.name, .type = xb.type});
  body->nodes.push_back({.op = ir::Op::Return, .operands = {ir::NodeId{0}}});
  std::set<std::string> symbols;  // the plan's kernel symbols
  for (const Step& s : plan.steps)
    symbols.insert(std::visit([](const auto& st) { return st.name; }, s));
  const ir::Node region{
      .op = ir::Op::FusedPointwise,
      .name = plan.buffers[static_cast<size_t>(x3)].name,
      .type = xb.type,
      .symbol = take_unique_name(symbols, "split_tf32x3_" + ir::c_identifier_chars(xb.name)),
      .body = body};
  KernelStep k =
      generate_pointwise_kernel(g, region, {.store = Store::Tf32x3Split, .tf32x3_chunk = chunk});
  k.ops = {"split_tf32x3"};
  k.inputs = {x};
  k.output = x3;
  return k;
}

// `whole` (a 3xTF32 GEMM over split buffers) as one GEMM per K-chunk of `chunk`: the first
// writes y (adding the residual, if any), each later one adds its product to y, and the last
// applies the epilogue (bias, activation) to the sum.
std::vector<GemmStep> chunk_steps(const GemmStep& whole, int64_t chunk) {
  const int64_t count = whole.k / chunk;
  if (count <= 1) return {whole};
  std::vector<GemmStep> out;
  for (int64_t j = 0; j < count; ++j) {
    GemmStep c = whole;
    c.name = fmt::format("{}.k{}", whole.name, j);
    c.k = chunk;
    c.k_begin = 3 * chunk * j;
    c.row_stride = whole.stored_k();
    c.accumulate = j > 0;
    if (j > 0) {  // the residual enters once, with the first chunk
      c.residual = -1;
      c.epilogue.residual = false;
    }
    if (j + 1 < count) {  // the bias and activation apply once, to the sum
      c.epilogue.bias = false;
      c.epilogue.act.reset();
      c.bias = -1;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

bool tf32x3_below_ieee(const GemmStep& step) {
  return step.tf32x3 && step.k != tf32x3_chunk_k(step.stored_row() / 3);
}

bool needs_tf32x3_tolerance(const Plan& plan) {
  return std::any_of(plan.steps.begin(), plan.steps.end(), [](const Step& s) {
    const auto* g = std::get_if<GemmStep>(&s);
    return g && tf32x3_below_ieee(*g);
  });
}

void apply_tf32x3(Plan& plan, const ir::Graph& g, const Lowering& lowering) {
  if (!lowering.looks_at(passes::ChoiceKind::Tf32x3)) return;
  bool changed = false;
  std::map<int, int> split_x;  // x -> its split buffer, once a taken rewrite made one
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto* gemm = std::get_if<GemmStep>(&plan.steps[i]);
    if (!gemm || gemm->dtype != ir::DType::F32 || gemm->tf32x3 ||
        plan.buffers[static_cast<size_t>(gemm->w)].stacked)
      continue;
    Plan trial = plan;
    std::vector<Step> replaced{*gemm}, rewritten;
    GemmStep split = *gemm;
    // Chunks at IEEE fp32's accuracy where K allows them, else one chunk (codegen/tf32x3.h).
    const int64_t ieee_chunk = tf32x3_chunk_k(gemm->k);
    const int64_t chunk = ieee_chunk > 0 ? ieee_chunk : gemm->k;
    size_t inserted = 0;
    if (auto it = split_x.find(gemm->x); it != split_x.end()) {
      split.x = it->second;
    } else {
      const Buffer& xb = plan.buffers[static_cast<size_t>(gemm->x)];
      split.x = add_buffer(trial, {.name = xb.name + kSuffix, .type = tripled(xb.type),
                                   .split_chunk = chunk});
      if (auto p = elementwise_producer(plan, g, gemm->x)) {
        auto& old = std::get<KernelStep>(trial.steps[p->step]);
        KernelStep k =
            regenerated(plan, g, *p, {.store = Store::Tf32x3Split, .tf32x3_chunk = chunk});
        k.output = split.x;
        replaced.insert(replaced.begin(), old);
        rewritten.push_back(k);
        old = std::move(k);
      } else {
        KernelStep k = split_kernel(trial, g, gemm->x, split.x, chunk);
        rewritten.push_back(k);
        trial.steps.insert(trial.steps.begin() + static_cast<std::ptrdiff_t>(i), std::move(k));
        inserted = 1;
      }
    }
    const auto w3 = std::find_if(trial.buffers.begin(), trial.buffers.end(),
                                 [&](const Buffer& b) { return b.split_of == gemm->w; });
    if (w3 != trial.buffers.end()) {
      split.w = static_cast<int>(w3 - trial.buffers.begin());
    } else {
      const Buffer& wb = plan.buffers[static_cast<size_t>(gemm->w)];
      split.w = add_buffer(trial, {.name = wb.name + kSuffix, .type = tripled(wb.type),
                                   .role = BufferRole::Param, .split_of = gemm->w,
                                   .split_chunk = chunk});
    }
    split.tf32x3 = true;
    const std::vector<GemmStep> chunks = chunk_steps(split, chunk);
    rewritten.insert(rewritten.end(), chunks.begin(), chunks.end());
    const auto at = trial.steps.begin() + static_cast<std::ptrdiff_t>(i + inserted);
    *at = chunks.front();
    trial.steps.insert(at + 1, chunks.begin() + 1, chunks.end());
    RewriteSite site{.kind = passes::ChoiceKind::Tf32x3, .step = gemm->name,
                     .nodes = gemm->ir_nodes, .n = gemm->n, .k = gemm->k, .dtype = gemm->dtype,
                     .plan = &plan, .replaced = replaced,
                     .detail = ieee_chunk > 0
                                   ? fmt::format("K in {} chunks of {}", chunks.size(), chunk)
                                   : fmt::format("one chunk, K = {} (less accurate than IEEE fp32)",
                                                 gemm->k),
                     .below_ieee = ieee_chunk <= 0};
    site.options.push_back(
        {.impl = ir::Impl::Tf32x3, .trial = std::move(trial), .rewritten = std::move(rewritten)});
    const bool take = lowering.pick(site).has_value();
    const int x = gemm->x;
    if (take) plan = std::move(*site.options.front().trial);
    lowering.record(plan, site, take);
    if (!take) continue;
    split_x[x] = std::get<GemmStep>(plan.steps[i + inserted]).x;
    i += inserted + chunks.size() - 1;
    changed = true;
  }
  if (changed) drop_unused_buffers(plan);
}

}  // namespace mlpc::codegen
