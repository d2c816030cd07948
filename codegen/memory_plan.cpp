#include "codegen/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace mlpc::codegen {
namespace {

int64_t aligned(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct Lifetime {
  int first = 0, last = 0;  // step indices, inclusive
  bool overlaps(const Lifetime& o) const { return first <= o.last && o.first <= last; }
};

// First and last step touching each buffer; whole-forward for inputs and outputs.
std::vector<Lifetime> lifetimes(const Plan& plan) {
  int end = std::max(0, plan.launches() - 1);
  std::vector<Lifetime> life(plan.buffers.size(), Lifetime{end + 1, -1});
  auto touch = [&](int b, int step) {
    if (b < 0) return;
    life[b].first = std::min(life[b].first, step);
    life[b].last = std::max(life[b].last, step);
  };
  for (int s = 0; s < plan.launches(); ++s)
    for (int b : step_buffers(plan.steps[s])) touch(b, s);
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    BufferRole r = plan.buffers[b].role;
    if (r == BufferRole::Input || r == BufferRole::Output) life[b] = {0, end};
  }
  return life;
}

}  // namespace

MemoryPlan plan_memory(const Plan& plan, int64_t batch) {
  MemoryPlan m;
  size_t n = plan.buffers.size();
  m.offsets.assign(n, -1);
  std::vector<Lifetime> life = lifetimes(plan);
  std::vector<int> order;
  for (size_t b = 0; b < n; ++b)
    if (plan.buffers[b].role != BufferRole::Param) {
      order.push_back(static_cast<int>(b));
      m.unshared_bytes += aligned(plan.buffers[b].bytes(batch));
    }
  // Largest first, each at the lowest offset clear of every placed buffer it is alive with.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan.buffers[a].bytes(batch) > plan.buffers[b].bytes(batch);
  });
  std::vector<int> placed;
  for (int b : order) {
    int64_t size = aligned(plan.buffers[b].bytes(batch));
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of conflicting buffers
    for (int p : placed)
      if (life[p].overlaps(life[b]))
        busy.push_back({m.offsets[p], m.offsets[p] + aligned(plan.buffers[p].bytes(batch))});
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [begin, end] : busy) {
      if (at + size <= begin) break;
      at = std::max(at, end);
    }
    m.offsets[b] = at;
    m.arena_bytes = std::max(m.arena_bytes, at + size);
    placed.push_back(b);
  }
  return m;
}

}  // namespace mlpc::codegen
