// Golden tests for pointwise fusion: input IR, the pass, the expected printed IR, and the reason
// recorded for every producer that did not fuse.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "pass_test_util.h"
#include "passes/dce.h"
#include "passes/fuse_pointwise.h"

using mlpc::test::after;
using mlpc::test::count;
using mlpc::test::dedent;
using namespace mlpc;

namespace {

// Fusion then DCE, as the pipeline runs them; the report is kept for assertions.
struct Fuse {
  passes::FusionReport* report;
  bool operator()(ir::Graph& g) const {
    bool changed = passes::fuse_pointwise(g, report);
    passes::dce(g);
    return changed;
  }
};

}  // namespace

TEST_CASE("geglu: gelu_tanh and mul fuse, the three GEMMs stay", "[fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
  %wg = param bf16[3072, 768]
  %wu = param bf16[3072, 768]
  %wd = param bf16[768, 3072]
  %g = matmul %x, %wg : bf16[M, 3072]
  %u = matmul %x, %wu : bf16[M, 3072]
  %a = gelu_tanh %g : bf16[M, 3072]
  %h = mul %a, %u : bf16[M, 3072]
  %y = matmul %h, %wd : bf16[M, 768]
  return %y
})", Fuse{&report});
  INFO(got);
  CHECK(got == dedent(R"(
    func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
      %wg = param bf16[3072, 768]
      %wu = param bf16[3072, 768]
      %wd = param bf16[768, 3072]
      %g = matmul %x, %wg : bf16[M, 3072]
      %u = matmul %x, %wu : bf16[M, 3072]
      %h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0(%g, %u) : bf16[M, 3072] {
        %a = gelu_tanh %g : bf16[M, 3072]
        %h = mul %a, %u : bf16[M, 3072]
        return %h
      }
      %y = matmul %h, %wd : bf16[M, 768]
      return %y
    })"));
  REQUIRE(report.find("g", "a") != nullptr);
  CHECK(report.find("g", "a")->reason == "producer is a matmul: fusion never crosses a GEMM");
  CHECK(report.find("a", "h")->verdict == passes::Verdict::Fused);
}

TEST_CASE("a chain of five pointwise ops becomes one kernel", "[fusion]") {
  std::string got = after(R"(
func @chain(%x: f32[M, 64]) -> f32[M, 64] {
  %a = relu %x : f32[M, 64]
  %b = exp %a : f32[M, 64]
  %c = neg %b : f32[M, 64]
  %d = scale %c, 0.25 : f32[M, 64]
  %e = sigmoid %d : f32[M, 64]
  return %e
})", Fuse{nullptr});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 1);
  CHECK(got == dedent(R"(
    func @chain(%x: f32[M, 64]) -> f32[M, 64] {
      %e = fused.pointwise @mlpc_fused_relu_exp_neg_scale_0(%x) : f32[M, 64] {
        %a = relu %x : f32[M, 64]
        %b = exp %a : f32[M, 64]
        %c = neg %b : f32[M, 64]
        %d = scale %c, 0.25 : f32[M, 64]
        %e = sigmoid %d : f32[M, 64]
        return %e
      }
      return %e
    })"));
}

TEST_CASE("a bias row vector broadcasts into the group", "[fusion]") {
  std::string got = after(R"(
func @lin(%x: f32[M, 32]) -> f32[M, 64] {
  %w = param f32[64, 32]
  %b = param f32[64]
  %mm = matmul %x, %w : f32[M, 64]
  %y = add %mm, %b : f32[M, 64]
  %r = relu %y : f32[M, 64]
  return %r
})", Fuse{nullptr});
  INFO(got);
  CHECK(got == dedent(R"(
    func @lin(%x: f32[M, 32]) -> f32[M, 64] {
      %w = param f32[64, 32]
      %b = param f32[64]
      %mm = matmul %x, %w : f32[M, 64]
      %r = fused.pointwise @mlpc_fused_add_relu_0(%mm, %b) : f32[M, 64] {
        %y = add %mm, %b : f32[M, 64]
        %r = relu %y : f32[M, 64]
        return %r
      }
      return %r
    })"));
}

TEST_CASE("a diamond whose users all join the group fuses whole", "[fusion]") {
  std::string got = after(R"(
func @diamond(%x: f32[M, 8]) -> f32[M, 8] {
  %a = relu %x : f32[M, 8]
  %b = exp %a : f32[M, 8]
  %c = tanh %a : f32[M, 8]
  %d = add %b, %c : f32[M, 8]
  return %d
})", Fuse{nullptr});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 1);
  CHECK(count(got, "= relu") == 1);
}

TEST_CASE("a cheap producer read by two kernels is recomputed in each", "[fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @two(%x: f32[M, 8]) -> (f32[M, 8], f32[M, 8]) {
  %a = relu %x : f32[M, 8]
  %b = exp %a : f32[M, 8]
  %c = tanh %a : f32[M, 8]
  return %b, %c
})", Fuse{&report});
  INFO(got);
  // Both kernels read %x instead of a stored %a, so %a is never written: 2 kernels, not 3.
  CHECK(got == dedent(R"(
    func @two(%x: f32[M, 8]) -> (f32[M, 8], f32[M, 8]) {
      %b = fused.pointwise @mlpc_fused_relu_exp_0(%x) : f32[M, 8] {
        %a = relu %x : f32[M, 8]
        %b = exp %a : f32[M, 8]
        return %b
      }
      %c = fused.pointwise @mlpc_fused_relu_tanh_1(%x) : f32[M, 8] {
        %a = relu %x : f32[M, 8]
        %c = tanh %a : f32[M, 8]
        return %c
      }
      return %b, %c
    })"));
  REQUIRE(report.find("a", "c") != nullptr);
  CHECK(report.find("a", "c")->verdict == passes::Verdict::Recomputed);
  CHECK(report.find("a", "c")->reason ==
        "producer has 2 users; recomputing it loads no more than reading it");
}

TEST_CASE("a producer that two full tensors feed is materialized, not recomputed", "[fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @two(%x: f32[M, 8], %z: f32[M, 8]) -> (f32[M, 8], f32[M, 8]) {
  %a = add %x, %z : f32[M, 8]
  %b = exp %a : f32[M, 8]
  %c = tanh %a : f32[M, 8]
  return %b, %c
})", Fuse{&report});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 3);
  REQUIRE(report.find("a", "c") != nullptr);
  CHECK(report.find("a", "c")->verdict == passes::Verdict::Rejected);
  CHECK(report.find("a", "c")->reason ==
        "producer has 2 users and recomputing it would load more: materialized");
}

TEST_CASE("a producer also read by a GEMM is materialized", "[fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @mixed(%x: f32[M, 8]) -> (f32[M, 4], f32[M, 8]) {
  %w = param f32[4, 8]
  %a = relu %x : f32[M, 8]
  %y = matmul %a, %w : f32[M, 4]
  %z = exp %a : f32[M, 8]
  return %y, %z
})", Fuse{&report});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 2);
  REQUIRE(report.find("a", "z") != nullptr);
  CHECK(report.find("a", "z")->reason ==
        "producer has 2 users, also read by %y (matmul): materialized");
}

TEST_CASE("an op over a row vector does not join a group over the full tensor", "[fusion]") {
  passes::FusionReport report;
  std::string got = after(R"(
func @space(%x: f32[M, 16]) -> f32[M, 16] {
  %b = param f32[16]
  %eb = exp %b : f32[16]
  %y = add %x, %eb : f32[M, 16]
  return %y
})", Fuse{&report});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 2);
  REQUIRE(report.find("eb", "y") != nullptr);
  CHECK(report.find("eb", "y")->reason == "producer iterates over [16], the group over [M, 16]");
}

TEST_CASE("a slice's operand is never fused into it, even at full width", "[fusion]") {
  // The kernel reads a slice's columns from memory; fusing the producer was an internal error
  // (found by fuzz_pipeline).
  passes::FusionReport report;
  std::string got = after(R"(
func @f(%x: bf16[M, 16]) -> bf16[M, 16] {
  %a = gelu_tanh %x : bf16[M, 16]
  %s = slice %a, 0 : bf16[M, 16]
  %y = mul %s, %s : bf16[M, 16]
  return %y
})", Fuse{&report});
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 2);
  REQUIRE(report.find("a", "s") != nullptr);
  CHECK(report.find("a", "s")->reason == "a slice reads its operand from memory");
  CHECK(report.find("s", "y")->verdict == passes::Verdict::Fused);
}

TEST_CASE("fusion does not fire on a graph without pointwise ops", "[fusion]") {
  const std::string text = dedent(R"(
    func @mm(%x: f32[M, 8]) -> f32[M, 4] {
      %w = param f32[4, 8]
      %y = matmul %x, %w : f32[M, 4]
      return %y
    })");
  bool changed = true;
  CHECK(after(text, Fuse{nullptr}, &changed) == text);
  CHECK_FALSE(changed);
}

TEST_CASE("eager mode puts every pointwise op in its own kernel", "[fusion]") {
  std::string got = after(R"(
func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
  %wg = param bf16[3072, 768]
  %wu = param bf16[3072, 768]
  %wd = param bf16[768, 3072]
  %g = matmul %x, %wg : bf16[M, 3072]
  %u = matmul %x, %wu : bf16[M, 3072]
  %a = gelu_tanh %g : bf16[M, 3072]
  %h = mul %a, %u : bf16[M, 3072]
  %y = matmul %h, %wd : bf16[M, 768]
  return %y
})", passes::isolate_pointwise);
  INFO(got);
  CHECK(count(got, "fused.pointwise") == 2);
  CHECK(count(got, "@mlpc_gelu_tanh_0(%g)") == 1);
  CHECK(count(got, "@mlpc_mul_1(%a, %u)") == 1);
}

TEST_CASE("a pointwise chain longer than a region's limit becomes several kernels", "[fusion]") {
  // 300 ops: regions of kMaxRegionOps (128), 128 and 44, so NVRTC's time stays linear in the
  // chain's length. Each cut is recorded with its reason.
  const size_t n = 300;
  std::string text = "func @chain(%x: f32[M, 64]) -> f32[M, 64] {\n";
  std::string prev = "%x";
  for (size_t i = 0; i < n; ++i) {
    text += fmt::format("  %v{} = {} {} : f32[M, 64]\n", i, i % 2 ? "neg" : "tanh", prev);
    prev = fmt::format("%v{}", i);
  }
  text += "  return " + prev + "\n}\n";
  ir::Graph g = ir::parse(text, "chain.mlp");
  passes::FusionReport report;
  REQUIRE(passes::fuse_pointwise(g, &report));
  std::vector<size_t> sizes;
  for (const ir::Node& node : g.nodes)
    if (node.op == ir::Op::FusedPointwise) sizes.push_back(node.body->nodes.size() - 2);
  INFO(ir::print(g));
  CHECK(sizes == std::vector<size_t>{44, passes::kMaxRegionOps, passes::kMaxRegionOps});
  int cuts = 0;
  for (const passes::FusionDecision& d : report.decisions)
    if (d.reason.find("the most one kernel takes") != std::string::npos) ++cuts;
  CHECK(cuts == 2);
}
