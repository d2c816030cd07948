// Golden tests for GEMM epilogue fusion (-O2): what folds into cuBLASLt's epilogue, and why not.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
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
      %r = matmul_bias_relu %x, %w, %b : bf16[M, 64]
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
      %t = matmul_bias_gelu_tanh %x, %w, %b : f32[M, 64]
      %y2 = matmul_bias %x, %v, %b : f32[M, 64]
      %e = gelu %y2 : f32[M, 64]
      return %t, %e
    })"));
  const passes::FusionDecision* d = report.find("y2", "e");
  REQUIRE(d != nullptr);
  CHECK(d->verdict == passes::Verdict::Rejected);
  CHECK(d->reason == "gelu is exact (erf); cuBLASLt's GELU epilogue is the tanh approximation");
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
      %y = matmul_residual %x, %w, %x : bf16[M, 64]
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
      %y = matmul_residual %x, %w, %b : f32[M, 64]
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
  CHECK(fc1.op == "matmul_bias");
  CHECK(fc1.epilogue == codegen::Epilogue::Bias);
  CHECK(std::get<codegen::KernelStep>(mlp3.plan.steps[1]).ops == std::vector<std::string>{"gelu"});
}
