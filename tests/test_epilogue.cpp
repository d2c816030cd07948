// Golden tests for GEMM epilogue fusion (-O2): what folds into a matmul's epilogue, and why not.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "compiler/levels.h"
#include "compiler/samples.h"
#include "pass_test_util.h"
#include "passes/fuse_epilogue.h"

using mlpc::test::after;
using mlpc::test::dedent;
using namespace mlpc;

namespace {

struct Epilogue {
  passes::FusionReport* report;
  bool operator()(ir::Graph& g) const { return passes::fuse_epilogue(g, report); }
};

}  // namespace

TEST_CASE("a bias add folds into the GEMM, then a relu on top of it", "[epilogue]") {
  std::string got = after(R"(
func @f(%x: bf16[M, 32]) -> bf16[M, 64] {
  %w = param bf16[64, 32]
  %b = param bf16[64]
  %mm = matmul %x, %w : bf16[M, 64]
  %y = add %b, %mm : bf16[M, 64]
  %r = relu %y : bf16[M, 64]
  return %r
})", Epilogue{nullptr});
  CHECK(got == dedent(R"(
    func @f(%x: bf16[M, 32]) -> bf16[M, 64] {
      %w = param bf16[64, 32]
      %b = param bf16[64]
      %r = matmul %x, %w, bias %b, act relu : bf16[M, 64]
      return %r
    })"));
}

TEST_CASE("gelu_tanh rides the GELU epilogue but exact gelu does not", "[epilogue]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @f(%x: f32[M, 32]) -> (f32[M, 64], f32[M, 64]) {
  %w = param f32[64, 32]
  %v = param f32[64, 32]
  %b = param f32[64]
  %m1 = matmul %x, %w : f32[M, 64]
  %y1 = add %m1, %b : f32[M, 64]
  %t = gelu_tanh %y1 : f32[M, 64]
  %m2 = matmul %x, %v : f32[M, 64]
  %y2 = add %m2, %b : f32[M, 64]
  %e = gelu %y2 : f32[M, 64]
  return %t, %e
})", Epilogue{&report});
  INFO(got);
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 32]) -> (f32[M, 64], f32[M, 64]) {
      %w = param f32[64, 32]
      %v = param f32[64, 32]
      %b = param f32[64]
      %t = matmul %x, %w, bias %b, act gelu_tanh : f32[M, 64]
      %y2 = matmul %x, %v, bias %b : f32[M, 64]
      %e = gelu %y2 : f32[M, 64]
      return %t, %e
    })"));
  const passes::FusionDecision* d = report.find("y2", "e");
  REQUIRE(d != nullptr);
  CHECK(d->verdict == passes::Verdict::Rejected);
  CHECK(d->reason == "cuBLASLt's GELU epilogue is the tanh approximation; gelu is exact (erf)");
}

TEST_CASE("a full-size add folds in as the residual (C, beta = 1)", "[epilogue]") {
  std::string got = after(R"(
func @f(%x: bf16[M, 64]) -> bf16[M, 64] {
  %w = param bf16[64, 64]
  %mm = matmul %x, %w : bf16[M, 64]
  %y = add %x, %mm : bf16[M, 64]
  return %y
})", Epilogue{nullptr});
  CHECK(got == dedent(R"(
    func @f(%x: bf16[M, 64]) -> bf16[M, 64] {
      %w = param bf16[64, 64]
      %y = matmul %x, %w, residual %x : bf16[M, 64]
      return %y
    })"));
}

TEST_CASE("the sum of two GEMMs: one folds with the other as its residual", "[epilogue]") {
  // Both products' only user is the add: one round used to fold both into it, dropping the
  // residual's GEMM (the folded node then named a wrong operand).
  std::string got = after(R"(
func @f(%x: f32[M, 32]) -> f32[M, 64] {
  %w = param f32[64, 32]
  %v = param f32[64, 32]
  %a = matmul %x, %w : f32[M, 64]
  %b = matmul %x, %v : f32[M, 64]
  %y = add %a, %b : f32[M, 64]
  return %y
})", Epilogue{nullptr});
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 32]) -> f32[M, 64] {
      %w = param f32[64, 32]
      %v = param f32[64, 32]
      %b = matmul %x, %v : f32[M, 64]
      %y = matmul %x, %w, residual %b : f32[M, 64]
      return %y
    })"));
}

TEST_CASE("a GEMM whose product has two users keeps it", "[epilogue]") {
  const std::string text = dedent(R"(
    func @f(%x: f32[M, 32]) -> (f32[M, 64], f32[M, 64]) {
      %w = param f32[64, 32]
      %b = param f32[64]
      %mm = matmul %x, %w : f32[M, 64]
      %y = add %mm, %b : f32[M, 64]
      return %y, %mm
    })");
  bool changed = true;
  CHECK(after(text, Epilogue{nullptr}, &changed) == text);
  CHECK_FALSE(changed);
}

TEST_CASE("plans at -O2: linear is one launch, mlp3 keeps exact GELU in 5", "[epilogue]") {
  CompiledGraph linear =
      compile(make_sample("linear"), {.epilogues = true, .build_kernels = false});
  CHECK(linear.plan.launches() == 1);
  CompiledGraph mlp3 = compile(make_sample("mlp3"), {.epilogues = true, .build_kernels = false});
  CHECK(mlp3.plan.launches() == 5);
  const auto& fc1 = std::get<codegen::GemmStep>(mlp3.plan.steps[0]);
  CHECK(fc1.epilogue == ir::GemmEpilogue{.bias = true});
  CHECK(std::get<codegen::KernelStep>(mlp3.plan.steps[1]).ops == std::vector<std::string>{"gelu"});
}

TEST_CASE("a relu folds into a GEMM without a bias", "[epilogue]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @f(%x: f16[M, 64]) -> f16[M, 64] {
  %w = param f16[64, 64]
  %mm = matmul %x, %w : f16[M, 64]
  %h = relu %mm : f16[M, 64]
  return %h
})", Epilogue{&report});
  CHECK(got == dedent(R"(
    func @f(%x: f16[M, 64]) -> f16[M, 64] {
      %w = param f16[64, 64]
      %h = matmul %x, %w, act relu : f16[M, 64]
      return %h
    })"));
  const passes::FusionDecision* d = report.find("mm", "h");
  REQUIRE(d != nullptr);
  CHECK(d->verdict == passes::Verdict::Fused);
  CHECK(d->reason == "epilogue relu(x.W^T)");
}

TEST_CASE("a bias and then a residual fold into one GEMM, in either order", "[epilogue]") {
  // x.W^T + r + b is x.W^T + b + r: the bias takes its operand slot either way.
  for (const char* order : {"bias first", "residual first"}) {
    INFO(order);
    const bool bias_first = std::string(order) == "bias first";
    std::string adds =
        bias_first ? "  %t = add %mm, %b : f16[M, 64]\n  %y = add %t, %x : f16[M, 64]\n"
                   : "  %t = add %x, %mm : f16[M, 64]\n  %y = add %b, %t : f16[M, 64]\n";
    std::string got = after("func @f(%x: f16[M, 64]) -> f16[M, 64] {\n"
                            "  %w = param f16[64, 64]\n  %b = param f16[64]\n"
                            "  %mm = matmul %x, %w : f16[M, 64]\n" + adds + "  return %y\n}\n",
                            Epilogue{nullptr});
    CHECK(got == dedent(R"(
      func @f(%x: f16[M, 64]) -> f16[M, 64] {
        %w = param f16[64, 64]
        %b = param f16[64]
        %y = matmul %x, %w, bias %b, residual %x : f16[M, 64]
        return %y
      })"));
  }
}

TEST_CASE("what does not fold, and why", "[epilogue]") {
  passes::FusionReport report;
  // Each GEMM stops where its epilogue (act(x.W^T + bias) + residual, as cuBLASLt runs it)
  // ends; %a3 and %a4 carry an epilogue written by hand.
  std::string got = after(R"(
func @f(%x: f32[M, 64]) -> (f32[M, 64], f32[M, 64], f32[M, 64], f32[M, 64], f32[M, 64]) {
  %w = param f32[64, 64]
  %b = param f32[64]
  %m1 = matmul %x, %w : f32[M, 64]
  %s = silu %m1 : f32[M, 64]
  %m2 = matmul %x, %w : f32[M, 64]
  %r2 = add %m2, %x : f32[M, 64]
  %a2 = relu %r2 : f32[M, 64]
  %a3 = matmul %x, %w, act relu : f32[M, 64]
  %b3 = add %a3, %b : f32[M, 64]
  %a4 = matmul %x, %w, bias %b, act gelu_tanh : f32[M, 64]
  %r4 = add %a4, %x : f32[M, 64]
  %m5 = matmul %x, %w : f32[M, 64]
  %g5 = gelu_tanh %m5 : f32[M, 64]
  %h5 = mul %g5, %x : f32[M, 64]
  return %s, %a2, %b3, %r4, %h5
})", Epilogue{&report});
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 64]) -> (f32[M, 64], f32[M, 64], f32[M, 64], f32[M, 64], f32[M, 64]) {
      %w = param f32[64, 64]
      %b = param f32[64]
      %m1 = matmul %x, %w : f32[M, 64]
      %s = silu %m1 : f32[M, 64]
      %r2 = matmul %x, %w, residual %x : f32[M, 64]
      %a2 = relu %r2 : f32[M, 64]
      %a3 = matmul %x, %w, act relu : f32[M, 64]
      %b3 = add %a3, %b : f32[M, 64]
      %a4 = matmul %x, %w, bias %b, act gelu_tanh : f32[M, 64]
      %r4 = add %a4, %x : f32[M, 64]
      %m5 = matmul %x, %w : f32[M, 64]
      %g5 = gelu_tanh %m5 : f32[M, 64]
      %h5 = mul %g5, %x : f32[M, 64]
      return %s, %a2, %b3, %r4, %h5
    })"));
  auto reason = [&](const char* producer, const char* consumer) {
    const passes::FusionDecision* d = report.find(producer, consumer);
    REQUIRE(d != nullptr);
    CHECK(d->verdict == passes::Verdict::Rejected);
    return d->reason;
  };
  CHECK(reason("m1", "s") == "cuBLASLt has no silu epilogue");
  CHECK(reason("r2", "a2") ==
        "relu would apply to the residual; the epilogue adds it after its activation");
  CHECK(reason("a3", "b3") == "the bias would come after relu; the epilogue adds it before");
  CHECK(reason("a4", "r4") ==
        "cuBLASLt adds the residual (its C) before the activation, not after gelu_tanh");
  // GeGLU's gate: the product stays plain for merge_gemms and the gated GEMM kernels.
  CHECK(reason("m5", "g5") ==
        "gelu_tanh joins the fused kernel after it: folded into a plain GEMM it saves no launch");
}

namespace {

// An f16 MLP of `layers` bias-free GEMMs of width 64, each followed by a relu but the last.
std::string relu_mlp(int layers) {
  std::string params, body;
  std::string h = "x";
  for (int i = 0; i < layers; ++i) {
    params += fmt::format("  %w{} = param f16[64, 64]\n", i);
    body += fmt::format("  %m{} = matmul %{}, %w{} : f16[M, 64]\n", i, h, i);
    h = fmt::format("m{}", i);
    if (i + 1 < layers) {
      body += fmt::format("  %h{} = relu %{} : f16[M, 64]\n", i, h);
      h = fmt::format("h{}", i);
    }
  }
  return "func @mlp(%x: f16[M, 64]) -> f16[M, 64] {\n" + params + body + "  return %" + h +
         "\n}\n";
}

}  // namespace

TEST_CASE("plans at -O2: a bias-free 6-layer relu MLP is 6 launches, bias + residual is 1",
          "[epilogue]") {
  CompileOptions o2 = options_for_level(2);
  o2.build_kernels = false;
  CompiledGraph mlp = compile(ir::parse(relu_mlp(6), "mlp.mlp"), o2);
  INFO(ir::print(mlp.pipeline.graph));
  CHECK(mlp.plan.launches() == 6);
  for (const codegen::Step& s : mlp.plan.steps) {
    const auto* g = std::get_if<codegen::GemmStep>(&s);
    REQUIRE(g);
    CHECK(g->epilogue == (g->name == "gemm_m5" ? ir::GemmEpilogue{}
                                                : ir::GemmEpilogue{.act = ir::Op::Relu}));
  }
  CompileOptions o1 = options_for_level(1);
  o1.build_kernels = false;
  CHECK(compile(ir::parse(relu_mlp(6), "mlp.mlp"), o1).plan.launches() == 11);

  CompiledGraph res = compile(ir::parse(R"(
func @f(%x: f16[M, 64]) -> f16[M, 64] {
  %w = param f16[64, 64]
  %b = param f16[64]
  %mm = matmul %x, %w : f16[M, 64]
  %t = add %mm, %b : f16[M, 64]
  %y = add %t, %x : f16[M, 64]
  return %y
})", "res.mlp"), o2);
  REQUIRE(res.plan.launches() == 1);
  const auto& g = std::get<codegen::GemmStep>(res.plan.steps[0]);
  CHECK(g.epilogue == ir::GemmEpilogue{.bias = true, .residual = true});
  CHECK(g.bias >= 0);
  CHECK(g.residual >= 0);
}
