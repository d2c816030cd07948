#include "codegen/plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace mlpc::codegen {

int64_t Buffer::bytes(int64_t batch) const {
  return numel(batch) * static_cast<int64_t>(ir::dtype_size(type.dtype));
}

std::vector<int*> step_buffer_refs(Step& s) {
  if (auto* g = std::get_if<GemmStep>(&s)) return {&g->x, &g->w, &g->bias, &g->residual, &g->y};
  auto& k = std::get<KernelStep>(s);
  std::vector<int*> refs;
  for (int& b : k.inputs) refs.push_back(&b);
  refs.push_back(&k.output);
  return refs;
}

std::vector<int> step_buffers(const Step& s) {
  if (auto* g = std::get_if<GemmStep>(&s)) return {g->x, g->w, g->bias, g->residual, g->y};
  const auto& k = std::get<KernelStep>(s);
  std::vector<int> out = k.inputs;
  out.push_back(k.output);
  return out;
}

std::optional<std::string> layout_error(const Plan& plan) {
  auto transposed = [&](int b) { return b >= 0 && plan.buffers[static_cast<size_t>(b)].transposed; };
  for (const Step& s : plan.steps) {
    if (const auto* g = std::get_if<GemmStep>(&s)) {
      if (g->x_transposed != transposed(g->x) ||
          (g->x_transposed && (g->tf32x3 || g->row_stride != 0)))
        return "GEMM " + g->name + ": reads x in another layout than it is stored in";
      // (A transposed w is a param derived from the weight in a compiled plan; the timing plans
      // of -O2's decisions fill it with values of their own.)
      if (g->w_transposed &&
          (!g->x_transposed || plan.buffers[static_cast<size_t>(g->w)].role != BufferRole::Param))
        return "GEMM " + g->name + ": a transposed w is a param, read with x transposed";
      for (int b : {g->w, g->bias, g->residual, g->y})
        if (transposed(b)) return "GEMM " + g->name + ": only x may be stored transposed";
    } else {
      const auto& k = std::get<KernelStep>(s);
      if ((k.store() == Store::Transposed) != transposed(k.output))
        return "kernel " + k.name + ": stores its output in another layout than planned";
      for (int i : k.inputs)
        if (transposed(i)) return "kernel " + k.name + ": reads a buffer stored transposed";
    }
  }
  for (const std::vector<int>* io : {&plan.inputs, &plan.outputs})
    for (int i : *io)
      if (transposed(i))
        return "buffer " + plan.buffers[static_cast<size_t>(i)].name +
               ": a graph's inputs and outputs are row-major";
  for (const Buffer& b : plan.buffers) {
    if (b.transpose_of < 0) continue;
    std::vector<int64_t> dims = plan.buffers[static_cast<size_t>(b.transpose_of)].type.shape.dims;
    std::reverse(dims.begin(), dims.end());
    if (b.role != BufferRole::Param || b.type.shape.dims != dims)
      return "param " + b.name + ": a transposed param is not its source's [k, n]";
  }
  return std::nullopt;
}

std::string take_unique_name(std::set<std::string>& taken, const std::string& base) {
  std::string name = base;
  for (int i = 2; !taken.insert(name).second; ++i) name = fmt::format("{}_{}", base, i);
  return name;
}

void drop_unused_buffers(Plan& plan) {
  std::vector<bool> used(plan.buffers.size(), false);
  auto use = [&](int b) {
    if (b >= 0) used[static_cast<size_t>(b)] = true;
  };
  for (const Step& step : plan.steps)
    for (int b : step_buffers(step)) use(b);
  for (int b : plan.inputs) use(b);
  for (int b : plan.outputs) use(b);
  std::vector<int> remap(plan.buffers.size(), -1);
  std::vector<Buffer> kept;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    if (!used[i] && plan.buffers[i].role == BufferRole::Intermediate) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(plan.buffers[i]);
  }
  auto fix = [&](int& b) {
    if (b >= 0) b = remap[static_cast<size_t>(b)];
  };
  for (Buffer& b : kept) {
    fix(b.view_of);
    fix(b.split_of);
    fix(b.transpose_of);
  }
  for (Step& step : plan.steps)
    for (int* b : step_buffer_refs(step)) fix(*b);
  for (int& b : plan.inputs) fix(b);
  for (int& b : plan.outputs) fix(b);
  plan.buffers = std::move(kept);
}

std::vector<std::string> gemm_ops(const ir::GemmEpilogue& e) {
  std::vector<std::string> ops{"matmul"};
  if (e.bias) ops.emplace_back("bias");
  if (e.act) ops.emplace_back(ir::op_name(*e.act));
  if (e.residual) ops.emplace_back("residual");
  return ops;
}

}  // namespace mlpc::codegen
