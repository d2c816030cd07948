// Limits that hold: a long pointwise chain compiles in time linear in its length (regions are
// cut at passes::kMaxRegionOps, identical kernels build once), and eager's kernels that are the
// same op on the same types run NVRTC once. docs/testing.md ("Limits") has the measured times.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <set>

#include "compiler/compile.h"
#include "ir/parser.h"
#include "passes/fuse_pointwise.h"
#include "host/scoped_env.h"

using namespace mlpc;

namespace {

// %v0 = op0 %x, %v1 = op1 %v0, ...: ops cycling through `ops`, f32[M, 256].
ir::Graph chain(size_t n, const std::vector<std::string>& ops) {
  std::string text = "func @chain(%x: f32[M, 256]) -> f32[M, 256] {\n";
  std::string prev = "%x";
  for (size_t i = 0; i < n; ++i) {
    text += fmt::format("  %v{} = {} {} : f32[M, 256]\n", i, ops[i % ops.size()], prev);
    prev = fmt::format("%v{}", i);
  }
  return ir::parse(text + "  return " + prev + "\n}\n", "chain.mlp");
}

double compile_seconds(const ir::Graph& g, const CompileOptions& o, CompiledGraph* out) {
  const auto t0 = std::chrono::steady_clock::now();
  *out = compile(g, o);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("eager kernels that are the same op on the same types build once", "[limits]") {
  const ir::Graph g = chain(100, {"relu"});
  const CompiledGraph c = compile(g, {.fusion = false, .arch = "sm_90", .use_cache = false});
  CHECK(c.plan.launches() == 100);
  CHECK(c.cache_misses == 1);  // one NVRTC build for the hundred launches
  CHECK(c.cubins.size() == 1);
  std::set<std::string> names;
  for (const codegen::Step& s : c.plan.steps)
    names.insert(std::visit([](const auto& step) { return step.name; }, s));
  CHECK(names.size() == 100);  // each step keeps its own name (the IR's region symbol)
}

TEST_CASE("a long pointwise chain compiles in time linear in its length", "[limits]") {
  // A 7-op cycle: every region of kMaxRegionOps starts at another phase of it, so the chain
  // builds up to 7 distinct kernels, each of kMaxRegionOps ops.
  const std::vector<std::string> ops{"tanh", "neg", "sigmoid", "relu", "exp", "neg", "tanh"};
  const CompileOptions o{.arch = "sm_90", .use_cache = false};
  CompiledGraph small, large;
  const double t_small = compile_seconds(chain(512, ops), o, &small);
  const double t_large = compile_seconds(chain(4096, ops), o, &large);
  INFO("512 ops: " << t_small << " s, " << small.cache_misses << " builds; 4096 ops: " << t_large
                   << " s, " << large.cache_misses << " builds");
  CHECK(large.plan.launches() == 4096 / passes::kMaxRegionOps);
  CHECK(large.cache_misses <= 8);
  // Generous for a shared 2-core machine; a compile that grows faster than its length fails it.
  CHECK(t_large / 4096 < 0.02);
  CHECK(t_large < 8 * std::max(t_small, 0.5));
}
