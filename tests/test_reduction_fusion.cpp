// Golden tests for row-reduction fusion: composites expand to primitives, each reduction becomes
// one fused.reduction kernel with its prologue and epilogue, and what must not fuse does not
// (with the reason printed). Eager mode gives every primitive its own kernel.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "pass_test_util.h"
#include "passes/dce.h"
#include "passes/expand_composites.h"
#include "passes/fuse_pointwise.h"
#include "passes/fuse_reduction.h"

using mlpc::test::after;
using mlpc::test::count;
using mlpc::test::dedent;
using namespace mlpc;

namespace {

// The fused pipeline's order: expand, fuse rows, fuse the rest pointwise, DCE.
struct FuseRows {
  passes::FusionReport* report = nullptr;
  bool operator()(ir::Graph& g) const {
    bool changed = passes::expand_composites(g);
    changed |= passes::fuse_reduction(g, report);
    changed |= passes::fuse_pointwise(g, report);
    passes::dce(g);
    return changed;
  }
};

std::vector<std::string> kinds(const codegen::Plan& p) {
  std::vector<std::string> k;
  for (const codegen::Step& s : p.steps) {
    if (std::holds_alternative<codegen::GemmStep>(s))
      k.push_back("gemm");
    else
      k.emplace_back(std::get<codegen::KernelStep>(s).kind_name());
  }
  return k;
}

}  // namespace

TEST_CASE("rmsnorm expands to fp32 primitives, as torch computes it", "[reduction][fusion]") {
  std::string got = after(R"(
func @n(%x: bf16[M, 768]) -> bf16[M, 768] {
  %w = param bf16[768]
  %y = rmsnorm %x, %w, 1e-05 : bf16[M, 768]
  return %y
})", passes::expand_composites);
  INFO(got);
  CHECK(got == dedent(R"(
    func @n(%x: bf16[M, 768]) -> bf16[M, 768] {
      %w = param bf16[768]
      %y.f32 = cast %x : f32[M, 768]
      %y.sq = square %y.f32 : f32[M, 768]
      %y.ms = reduce_mean %y.sq : f32[M, 1]
      %y.ms_eps = add_scalar %y.ms, 1e-05 : f32[M, 1]
      %y.rstd = rsqrt %y.ms_eps : f32[M, 1]
      %y.normed = mul %y.f32, %y.rstd : f32[M, 768]
      %y.weight = cast %w : f32[768]
      %y.scaled = mul %y.normed, %y.weight : f32[M, 768]
      %y = cast %y.scaled : bf16[M, 768]
      return %y
    })"));
}

TEST_CASE("an f32 softmax expands without casts and keeps its name", "[reduction][fusion]") {
  bool changed = false;
  std::string got = after(R"(
func @s(%x: f32[M, 10]) -> f32[M, 10] {
  %p = softmax %x : f32[M, 10]
  return %p
})", passes::expand_composites, &changed);
  CHECK(changed);
  CHECK(got == dedent(R"(
    func @s(%x: f32[M, 10]) -> f32[M, 10] {
      %p.max = reduce_max %x : f32[M, 1]
      %p.centered = sub %x, %p.max : f32[M, 10]
      %p.exp = exp %p.centered : f32[M, 10]
      %p.sum = reduce_sum %p.exp : f32[M, 1]
      %p = div %p.exp, %p.sum : f32[M, 10]
      return %p
    })"));
  // Nothing to expand: no change.
  after("func @f(%x: f32[4]) -> f32[4] {\n  return %x\n}", passes::expand_composites, &changed);
  CHECK_FALSE(changed);
}

TEST_CASE("rmsnorm becomes one row kernel: prologue cast, reduction, epilogue",
          "[reduction][fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @n(%x: bf16[M, 768]) -> bf16[M, 768] {
  %w = param bf16[768]
  %y = rmsnorm %x, %w, 1e-05 : bf16[M, 768]
  return %y
})", FuseRows{&report});
  INFO(got);
  CHECK(got == dedent(R"(
    func @n(%x: bf16[M, 768]) -> bf16[M, 768] {
      %w = param bf16[768]
      %y = fused.reduction @mlpc_rows_reduce_mean_0(%x, %w) : bf16[M, 768] {
        %y.f32 = cast %x : f32[M, 768]
        %y.sq = square %y.f32 : f32[M, 768]
        %y.ms = reduce_mean %y.sq : f32[M, 1]
        %y.ms_eps = add_scalar %y.ms, 1e-05 : f32[M, 1]
        %y.rstd = rsqrt %y.ms_eps : f32[M, 1]
        %y.normed = mul %y.f32, %y.rstd : f32[M, 768]
        %y.weight = cast %w : f32[768]
        %y.scaled = mul %y.normed, %y.weight : f32[M, 768]
        %y = cast %y.scaled : bf16[M, 768]
        return %y
      }
      return %y
    })"));
  // The weight's cast to f32 is a row vector computed inside the kernel, not a launch of its own.
  REQUIRE(report.find("y.weight", "y.scaled") != nullptr);
  CHECK(report.find("y.weight", "y.scaled")->verdict == passes::Verdict::Fused);
}

TEST_CASE("softmax: two reductions, one kernel, and the bias add before it joins as prologue",
          "[reduction][fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @c(%x: f32[M, 64]) -> f32[M, 10] {
  %w = param f32[10, 64]
  %b = param f32[10]
  %mm = matmul %x, %w : f32[M, 10]
  %l = add %mm, %b : f32[M, 10]
  %p = softmax %l : f32[M, 10]
  return %p
})", FuseRows{&report});
  INFO(got);
  CHECK(count(got, "fused.reduction") == 1);
  CHECK(count(got, "fused.pointwise") == 0);
  CHECK(got == dedent(R"(
    func @c(%x: f32[M, 64]) -> f32[M, 10] {
      %w = param f32[10, 64]
      %b = param f32[10]
      %mm = matmul %x, %w : f32[M, 10]
      %p = fused.reduction @mlpc_rows_reduce_max_reduce_sum_0(%mm, %b) : f32[M, 10] {
        %l = add %mm, %b : f32[M, 10]
        %p.max = reduce_max %l : f32[M, 1]
        %p.centered = sub %l, %p.max : f32[M, 10]
        %p.exp = exp %p.centered : f32[M, 10]
        %p.sum = reduce_sum %p.exp : f32[M, 1]
        %p = div %p.exp, %p.sum : f32[M, 10]
        return %p
      }
      return %p
    })"));
  REQUIRE(report.find("mm", "l") != nullptr);
  CHECK(report.find("mm", "l")->reason == "producer is a matmul: fusion never crosses a GEMM");
  REQUIRE(report.find("l", "p.centered") != nullptr);
  CHECK(report.find("l", "p.centered")->verdict == passes::Verdict::Fused);
}

TEST_CASE("must not fuse: a value also read outside is materialized, with the reason",
          "[reduction][fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @n(%x: f32[M, 32], %r: f32[M, 32]) -> (f32[M, 32], f32[M, 32]) {
  %w = param f32[32]
  %h = add %x, %r : f32[M, 32]
  %y = rmsnorm %h, %w, 1e-06 : f32[M, 32]
  return %h, %y
})", FuseRows{&report});
  INFO(got);
  CHECK(count(got, "fused.reduction") == 1);
  CHECK(count(got, "fused.pointwise") == 1);  // %h: its own kernel, stored for both readers
  REQUIRE(report.find("h", "y.normed") != nullptr);
  CHECK(report.find("h", "y.normed")->reason ==
        "producer has 3 users, also read by the return: materialized");
}

TEST_CASE("must not fuse: a reduction over other rows stays its own kernel",
          "[reduction][fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @f(%x: f32[M, 64], %z: f32[M, 32]) -> f32[M, 32] {
  %s = reduce_sum %x : f32[M, 1]
  %y = mul %z, %s : f32[M, 32]
  return %y
})", FuseRows{&report});
  INFO(got);
  CHECK(count(got, "fused.reduction") == 2);
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 64], %z: f32[M, 32]) -> f32[M, 32] {
      %s = fused.reduction @mlpc_rows_reduce_sum_0(%x) : f32[M, 1] {
        %s = reduce_sum %x : f32[M, 1]
        return %s
      }
      %y = fused.reduction @mlpc_rows_mul_1(%z, %s) : f32[M, 32] {
        %y = mul %z, %s : f32[M, 32]
        return %y
      }
      return %y
    })"));
  REQUIRE(report.find("s", "y") != nullptr);
  CHECK(report.find("s", "y")->reason == "producer [M, 1] is not in the group's rows [M, 32]");
}

TEST_CASE("fuse-pointwise alone never fuses a reduction as if pointwise", "[reduction][fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @f(%x: f32[M, 8]) -> f32[M, 1] {
  %e = exp %x : f32[M, 8]
  %s = reduce_sum %e : f32[M, 1]
  %y = relu %s : f32[M, 1]
  return %y
})", [&](ir::Graph& g) { return passes::fuse_pointwise(g, &report); });
  INFO(got);
  CHECK(got.find("%s = reduce_sum %e : f32[M, 1]\n  %y = fused.pointwise") != std::string::npos);
  REQUIRE(report.find("s", "y") != nullptr);
  CHECK(report.find("s", "y")->reason ==
        "producer is a row reduction, not pointwise: fuse-reduction gives it a row kernel");
}

TEST_CASE("eager: every primitive of a composite is its own kernel", "[reduction][fusion]") {
  std::string got = after(R"(
func @s(%x: f32[M, 10]) -> f32[M, 10] {
  %p = softmax %x : f32[M, 10]
  return %p
})", [](ir::Graph& g) {
    passes::expand_composites(g);
    passes::isolate_reduction(g);
    return passes::isolate_pointwise(g);
  });
  INFO(got);
  // reduce_max, sub (a per-row broadcast), reduce_sum, div: row kernels; exp: pointwise.
  CHECK(count(got, "fused.reduction") == 4);
  CHECK(count(got, "fused.pointwise") == 1);
  CHECK(count(got, "return") == 6);
}

TEST_CASE("ffn plans: one norm kernel before the GEMMs, every primitive eager",
          "[reduction][samples]") {
  CompiledGraph o1 = compile(make_sample("ffn"), {.build_kernels = false});
  CHECK(kinds(o1.plan) == std::vector<std::string>{"reduction", "gemm", "gemm", "pointwise",
                                                   "gemm", "pointwise"});
  CompiledGraph o2 = compile(make_sample("ffn"), {.epilogues = true, .build_kernels = false});
  CHECK(kinds(o2.plan) == std::vector<std::string>{"reduction", "gemm", "gemm", "pointwise",
                                                   "gemm"});
  const auto& norm = std::get<codegen::KernelStep>(o2.plan.steps[0]);
  CHECK(norm.ops == std::vector<std::string>{"cast", "square", "reduce_mean", "add_scalar",
                                             "rsqrt", "mul", "cast", "mul", "cast"});
  // 768 bf16: a warp per row, 3 vectors of 8 per lane.
  CHECK(norm.as<codegen::RowReduction>()->threads_per_row == 32);
  CHECK(norm.vec == 8);
  const auto& down = std::get<codegen::GemmStep>(o2.plan.steps[4]);
  CHECK(down.epilogue == ir::GemmEpilogue{.residual = true});
  // Eager: rmsnorm's 9 primitives, 3 GEMMs, gelu_tanh, mul and the residual add.
  CompiledGraph eager = compile(make_sample("ffn"), {.fusion = false, .build_kernels = false});
  CHECK(eager.plan.launches() == 15);
}

TEST_CASE("other samples: one row kernel per norm or softmax", "[reduction][samples]") {
  CompiledGraph sw =
      compile(make_sample("ffn_swiglu"), {.epilogues = true, .build_kernels = false});
  CHECK(kinds(sw.plan) == std::vector<std::string>{"reduction", "gemm", "gemm", "pointwise",
                                                   "gemm"});
  CompiledGraph cl = compile(make_sample("classifier"), {.build_kernels = false});
  CHECK(kinds(cl.plan) == std::vector<std::string>{"gemm", "pointwise", "gemm", "reduction"});
  nlohmann::json j = plan_json(cl, 4096);
  CHECK(j["kernels"][3]["kind"] == "reduction");
  CHECK(j["kernels"][3]["ops"][0] == "add");  // the bias add is the softmax's prologue
}
