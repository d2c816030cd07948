// Row reductions on the CPU: the reference's composites against values computed by hand, and
// the composite, its expansion and the fused graph agree at row lengths 1, 7, 768, 4096 and
// 14336 (the GPU side of the same check is tests/gpu/test_gpu_reduction.cpp).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>

#include "compiler/check.h"
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "runtime/reference/reference.h"
#include "runtime/reference/tolerance.h"

using namespace mlpc;
using runtime::HostTensor;

namespace {

HostTensor f32(std::vector<int64_t> dims, std::vector<double> data) {
  return {ir::DType::F32, std::move(dims), std::move(data)};
}

const char* kRows = R"(
func @rows(%x: {0}[M, {1}], %r: {0}[M, {1}]) -> ({0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, 1]) {{
  %w = param {0}[{1}]
  %b = param {0}[{1}]
  %h = add %x, %r : {0}[M, {1}]
  %rms = rmsnorm %h, %w, 1e-05 : {0}[M, {1}]
  %ln = layernorm %x, %w, %b, 1e-05 : {0}[M, {1}]
  %sm = softmax %x : {0}[M, {1}]
  %mx = reduce_max %r : {0}[M, 1]
  return %rms, %ln, %sm, %mx
}})";

}  // namespace

TEST_CASE("reference composites and reductions against hand-computed rows",
          "[reduction][reference]") {
  Values v{{"x", f32({2, 4}, {1, 2, 3, 4, -1, 0, 0, 1})},
           {"w", f32({4}, {1, 1, 2, 0.5})},
           {"b", f32({4}, {0, 1, 0, 0})}};
  auto out = runtime::reference_forward(ir::parse(R"(
func @f(%x: f32[M, 4]) -> (f32[M, 4], f32[M, 4], f32[M, 4], f32[M, 1], f32[M, 1], f32[M, 1]) {
  %w = param f32[4]
  %b = param f32[4]
  %rms = rmsnorm %x, %w, 0 : f32[M, 4]
  %ln = layernorm %x, %w, %b, 0 : f32[M, 4]
  %sm = softmax %x : f32[M, 4]
  %s = reduce_sum %x : f32[M, 1]
  %m = reduce_mean %x : f32[M, 1]
  %mx = reduce_max %x : f32[M, 1]
  return %rms, %ln, %sm, %s, %m, %mx
})", "f.mlp"), v);
  const double rms0 = std::sqrt(30.0 / 4), rms1 = std::sqrt(2.0 / 4);
  std::vector<double> rms = {1 / rms0, 2 / rms0, 6 / rms0, 2 / rms0,
                             -1 / rms1, 0, 0, 0.5 / rms1};
  for (size_t i = 0; i < rms.size(); ++i) CHECK(out[0].data[i] == Approx(rms[i]).epsilon(1e-12));
  // Row 0: mean 2.5, variance 1.25.
  const double sd = std::sqrt(1.25);
  CHECK(out[1].data[0] == Approx(-1.5 / sd).epsilon(1e-12));
  CHECK(out[1].data[1] == Approx(-0.5 / sd + 1).epsilon(1e-12));
  CHECK(out[1].data[3] == Approx(1.5 / sd * 0.5).epsilon(1e-12));
  const double z = std::exp(-3) + std::exp(-2) + std::exp(-1) + 1;
  CHECK(out[2].data[3] == Approx(1 / z).epsilon(1e-12));
  CHECK(out[2].data[0] == Approx(std::exp(-3) / z).epsilon(1e-12));
  CHECK(out[3].data == std::vector<double>{10, 0});
  CHECK(out[4].data == std::vector<double>{2.5, 0});
  CHECK(out[5].data == std::vector<double>{4, 1});
  CHECK(out[5].dims == std::vector<int64_t>{2, 1});
}

TEST_CASE("softmax subtracts the row max: huge logits stay finite", "[reduction][reference]") {
  const std::string text = R"(
func @s(%x: f32[M, 3]) -> f32[M, 3] {
  %p = softmax %x : f32[M, 3]
  return %p
})";
  Values v{{"x", f32({1, 3}, {1000, 1000, 999})}};
  for (bool fusion : {false, true}) {
    // Expanded (and fused) graphs run through the same interpreter: max first, then exp.
    ir::Graph g = passes::run_pipeline(ir::parse(text, "s.mlp"), {.fusion = fusion}).graph;
    auto p = runtime::reference_forward(g, v)[0].data;
    const double e = std::exp(-1.0);
    CHECK(p[0] == Approx(1 / (2 + e)));
    CHECK(p[2] == Approx(e / (2 + e)));
  }
}

TEST_CASE("composite, expansion and fused graph agree at every row length",
          "[reduction][reference]") {
  for (int64_t n : {1, 7, 768, 4096, 14336})
    for (const char* dt : {"f32", "bf16"}) {
      INFO("row length " << n << " " << dt);
      ir::Graph g = ir::parse(fmt::format(fmt::runtime(kRows), dt, n), "rows.mlp");
      const int64_t batch = n > 1000 ? 3 : 17;
      Values values = random_values(g, batch, 7);
      auto want = runtime::reference_forward(g, values);
      for (bool fusion : {false, true}) {
        INFO((fusion ? "fused" : "eager"));
        ir::Graph lowered = passes::run_pipeline(g, {.fusion = fusion}).graph;
        auto got = runtime::reference_forward(lowered, values);
        REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          INFO("output " << i);
          // f32: the expansion is the same math in another order. bf16: its final cast rounds
          // once where the composite's fp64 result is not rounded.
          runtime::Tolerance tol = std::string(dt) == "f32" ? runtime::Tolerance{1e-12, 1e-12}
                                                            : runtime::Tolerance{0x1.0p-8, 1e-12};
          runtime::Comparison c = runtime::compare(got[i], want[i], tol);
          INFO("max_abs_err " << c.max_abs_err << " ratio " << c.worst_ratio);
          CHECK(c.ok);
        }
      }
    }
}
