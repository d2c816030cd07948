// Row reductions and the norm / softmax composites in the IR: text form round trips, tracing
// gives the same graph, and every kind of bad input gets one clear line.
#include <catch2/catch.hpp>

#include "compiler/tracing.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace mlpc;
using Catch::Matchers::Contains;

namespace {

std::string err(const std::string& text) {
  try {
    ir::parse(text, "r.mlp");
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

const char* kAllOps = R"(func @ops(%x: f32[M, 16]) -> (f32[M, 16], f32[M, 16], f32[M, 16], f32[M, 1]) {
  %w = param f32[16]
  %b = param f32[16]
  %s = reduce_sum %x : f32[M, 1]
  %m = reduce_mean %x : f32[M, 1]
  %mx = reduce_max %x : f32[M, 1]
  %d = sub %x, %mx : f32[M, 16]
  %sq = square %d : f32[M, 16]
  %rt = sqrt %sq : f32[M, 16]
  %e = add_scalar %m, -2.5e-06 : f32[M, 1]
  %r = rsqrt %e : f32[M, 1]
  %n = mul %r, %rt : f32[M, 16]
  %rms = rmsnorm %n, %w, 1e-06 : f32[M, 16]
  %ln = layernorm %x, %w, %b, 1e-05 : f32[M, 16]
  %sm = softmax %x : f32[M, 16]
  %t = add %s, %r : f32[M, 1]
  return %rms, %ln, %sm, %t
}
)";

}  // namespace

TEST_CASE("reductions, new pointwise ops and composites print and parse back exactly",
          "[reduction][parser]") {
  ir::Graph g = ir::parse(kAllOps, "r.mlp");
  CHECK(ir::print(g) == kAllOps);
  CHECK(ir::print(ir::parse(ir::print(g), "again.mlp")) == kAllOps);
}

TEST_CASE("a fused.reduction region prints and parses back", "[reduction][parser]") {
  const std::string text = R"(func @f(%x: f32[M, 8]) -> f32[M, 8] {
  %w = param f32[8]
  %y = fused.reduction @mlpc_rows_reduce_max_0(%x, %w) : f32[M, 8] {
    %m = reduce_max %x : f32[M, 1]
    %d = sub %x, %m : f32[M, 8]
    %y = mul %d, %w : f32[M, 8]
    return %y
  }
  return %y
}
)";
  CHECK(ir::print(ir::parse(text, "f.mlp")) == text);
}

TEST_CASE("tracing records the composites as written", "[reduction][trace]") {
  Tracer t("n");
  Tensor x = t.input("x", ir::DType::BF16, {kBatch, 32});
  Tensor y = rmsnorm(x, 1e-6, "rms");
  Tensor z = softmax(layernorm(y, 1e-5, "ln")).named("z");
  Tensor s = (reduce_max(z) + 1.0).named("s");
  ir::Graph g = t.finish({z, (z * rsqrt(s)).named("out")});
  CHECK(ir::print(g) == R"(func @n(%x: bf16[M, 32]) -> (bf16[M, 32], bf16[M, 32]) {
  %rms.weight = param bf16[32]
  %rms = rmsnorm %x, %rms.weight, 1e-06 : bf16[M, 32]
  %ln.weight = param bf16[32]
  %ln.bias = param bf16[32]
  %ln = layernorm %rms, %ln.weight, %ln.bias, 1e-05 : bf16[M, 32]
  %z = softmax %ln : bf16[M, 32]
  %3 = reduce_max %z : bf16[M, 1]
  %s = add_scalar %3, 1 : bf16[M, 1]
  %5 = rsqrt %s : bf16[M, 1]
  %out = mul %z, %5 : bf16[M, 32]
  return %z, %out
}
)");
}

TEST_CASE("bad reductions and composites: one located line each", "[reduction][parser]") {
  auto in_func = [](const std::string& body) {
    return "func @f(%x: f32[M, 8], %v: f32[M, 4]) -> f32[M, 8] {\n" + body + "\n  return %x\n}";
  };
  // A reduction keeps the dim as 1.
  CHECK(err(in_func("  %s = reduce_sum %x : f32[M, 8]")) ==
        "r.mlp:2:24: error: declared type f32[M, 8] does not match inferred type f32[M, 1]");
  CHECK_THAT(err(in_func("  %s = reduce_max %x, %x : f32[M, 1]")),
             Contains("'reduce_max' takes 1 operand, got 2"));
  // A per-row value broadcasts only over rows of the same leading dims.
  CHECK_THAT(err(in_func("  %s = reduce_sum %v : f32[M, 1]\n  %t = reduce_sum %s : f32[M, 1]\n"
                         "  %y = mul %x, %s : f32[M, 8]\n  %z = sub %s, %x : f32[M, 8]")),
             !Contains("error"));
  CHECK_THAT(err("func @f(%x: f32[M, 8], %c: f32[4, 1]) -> f32[M, 8] {\n"
                 "  %y = mul %x, %c : f32[M, 8]\n  return %y\n}"),
             Contains("operand shapes do not broadcast: [M, 8] vs [4, 1]"));
  // Composite weights are row vectors of x's dtype and length.
  CHECK(err(in_func("  %w = param f32[4]\n  %y = rmsnorm %x, %w, 1e-05 : f32[M, 8]")) ==
        "r.mlp:3:8: error: node %y (rmsnorm %x: f32[M, 8], %w: f32[4]): 'rmsnorm' weight must "
        "be f32[8], got f32[4]");
  CHECK_THAT(err(in_func("  %w = param f32[8]\n  %b = param f16[8]\n"
                         "  %y = layernorm %x, %w, %b, 1e-05 : f32[M, 8]")),
             Contains("'layernorm' bias must be f32[8], got f16[8]"));
  // The eps is required, finite and not negative.
  CHECK(err(in_func("  %w = param f32[8]\n  %y = rmsnorm %x, %w : f32[M, 8]")) ==
        "r.mlp:3:23: error: expected ',', got ':'");
  CHECK_THAT(err(in_func("  %w = param f32[8]\n  %y = rmsnorm %x, %w, -1 : f32[M, 8]")),
             Contains("eps must be finite and >= 0, got -1"));
  CHECK_THAT(err(in_func("  %y = softmax %x, 1e-05 : f32[M, 8]")),
             Contains("expected a value (%name), got '1e-05'"));
  CHECK_THAT(err(in_func("  %y = add_scalar %x, 1e999 : f32[M, 8]")),
             Contains("number 1e999 is out of range"));
}

TEST_CASE("bad fused.reduction regions are rejected", "[reduction][parser]") {
  // A matmul is no row op.
  CHECK_THAT(err(R"(func @f(%x: f32[M, 8]) -> f32[M, 8] {
  %w = param f32[8, 8]
  %y = fused.reduction @k(%x, %w) : f32[M, 8] {
    %y = matmul %x, %w : f32[M, 8]
    return %y
  }
  return %y
})"),
             Contains("'matmul' is not allowed in a fused.reduction region"));
  // A reduction is not pointwise: never inside a fused.pointwise region.
  CHECK_THAT(err(R"(func @f(%x: f32[M, 8]) -> f32[M, 1] {
  %y = fused.pointwise @k(%x) : f32[M, 1] {
    %y = reduce_sum %x : f32[M, 1]
    return %y
  }
  return %y
})"),
             Contains("'reduce_sum' is not allowed in a fused.pointwise region"));
  // Values of other rows than the region's.
  CHECK_THAT(err(R"(func @f(%x: f32[M, 8], %z: f32[M, 4]) -> f32[M, 8] {
  %y = fused.reduction @k(%x, %z) : f32[M, 8] {
    %s = reduce_sum %z : f32[M, 1]
    %y = mul %x, %s : f32[M, 8]
    return %y
  }
  return %y
})"),
             Contains("region value %x (f32[M, 8]) is outside the region's rows [M, 4]"));
  CHECK_THAT(err(R"(func @f(%x: f32[M, 8]) -> f32[M, 8] {
  %y = fused.reduction @k(%x) : f32[M, 8] {
    %y = fused.reduction @j(%x) : f32[M, 8] {
      %y = relu %x : f32[M, 8]
      return %y
    }
    return %y
  }
  return %y
})"),
             Contains("fused regions cannot nest"));
}
