// The arena plan: buffers alive at the same step never overlap; dead ones are reused.
#include <catch2/catch.hpp>

#include "codegen/memory_plan.h"
#include "compiler/compile.h"
#include "compiler/samples.h"

using namespace mlpc;

namespace {

// Every pair of buffers used by one step occupies disjoint bytes.
void check_no_conflicts(const codegen::Plan& p, const codegen::MemoryPlan& m, int64_t batch) {
  auto range = [&](int b) {
    return std::pair{m.offsets[b], m.offsets[b] + p.buffers[b].bytes(batch)};
  };
  std::vector<int> live;
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (p.buffers[b].role == codegen::BufferRole::Input ||
        p.buffers[b].role == codegen::BufferRole::Output)
      live.push_back(static_cast<int>(b));
  for (const codegen::Step& s : p.steps) {
    std::vector<int> used = live;
    if (auto* g = std::get_if<codegen::GemmStep>(&s)) {
      for (int b : {g->x, g->y, g->bias, g->residual})
        if (b >= 0 && p.buffers[b].role != codegen::BufferRole::Param) used.push_back(b);
    } else {
      const auto& k = std::get<codegen::KernelStep>(s);
      for (int b : k.inputs)
        if (p.buffers[b].role != codegen::BufferRole::Param) used.push_back(b);
      used.push_back(k.output);
    }
    for (size_t i = 0; i < used.size(); ++i)
      for (size_t j = i + 1; j < used.size(); ++j) {
        if (used[i] == used[j]) continue;
        auto [a0, a1] = range(used[i]);
        auto [b0, b1] = range(used[j]);
        INFO(p.buffers[used[i]].name << " vs " << p.buffers[used[j]].name);
        CHECK((a1 <= b0 || b1 <= a0));
      }
  }
  for (size_t b = 0; b < p.buffers.size(); ++b)
    if (m.offsets[b] >= 0) CHECK(m.offsets[b] % codegen::kArenaAlignment == 0);
}

}  // namespace

TEST_CASE("every sample's arena plan is conflict-free, eager and fused", "[memory]") {
  for (const SampleInfo& s : samples())
    for (bool fusion : {false, true}) {
      INFO(s.name << (fusion ? " fused" : " eager"));
      CompiledGraph c = compile(make_sample(s.name), {.fusion = fusion, .build_kernels = false});
      for (int64_t batch : {1, 37, 8192}) {
        codegen::MemoryPlan m = codegen::plan_memory(c.plan, batch);
        check_no_conflicts(c.plan, m, batch);
        CHECK(m.arena_bytes <= m.unshared_bytes);
      }
    }
}

TEST_CASE("mlp3 eager reuses dead intermediates", "[memory]") {
  CompiledGraph c = compile(make_sample("mlp3"), {.fusion = false, .build_kernels = false});
  codegen::MemoryPlan m = codegen::plan_memory(c.plan, 8192);
  // Eight [8192, 4096|1024] f32 intermediates one after another: at most three are alive at once
  // (a step's inputs and its output), plus x and the output.
  CHECK(m.arena_bytes < m.unshared_bytes / 2);
}
