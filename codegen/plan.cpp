#include "codegen/plan.h"

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

LaunchDims launch_dims(const KernelStep& k, int64_t numel) {
  if (k.threads_per_row > 0) {
    constexpr int64_t kMaxRowGrid = int64_t{1} << 30;  // beyond that, the kernel loops over rows
    int64_t rows = numel / std::max<int64_t>(k.out_row_len, 1);
    int64_t grid = std::clamp<int64_t>((rows + k.rows_per_block - 1) / k.rows_per_block, 1,
                                       kMaxRowGrid);
    return {static_cast<unsigned>(grid),
            static_cast<unsigned>(k.threads_per_row * k.rows_per_block)};
  }
  constexpr int64_t kBlock = 256;
  constexpr int64_t kMaxGrid = 132 * 32;  // 32 blocks per SM on an H200; beyond that, loop
  int64_t work = (numel + k.vec - 1) / k.vec;
  int64_t grid = std::clamp<int64_t>((work + kBlock - 1) / kBlock, 1, kMaxGrid);
  return {static_cast<unsigned>(grid), static_cast<unsigned>(kBlock)};
}

}  // namespace mlpc::codegen
