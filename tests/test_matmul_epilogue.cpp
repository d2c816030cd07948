// The matmul op's epilogue, y = act(x . W^T + bias) + residual: its text form (the old op
// spellings as sugar), its errors, its fp64 reference, and how plans run what cuBLASLt cannot.
#include <catch2/catch.hpp>

#include <cmath>

#include "codegen/plan_builder.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/gemm_epilogue.h"
#include "pass_test_util.h"
#include "runtime/reference/reference.h"

using mlpc::test::dedent;
using namespace mlpc;

namespace {

std::string err(std::string_view text) {
  try {
    ir::parse(text, "file.mlp");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A function of x[M, 4] with a weight w[4, 4], a bias b[4] and the given statements.
std::string in_func(std::string_view body) {
  return "func @f(%x: f32[M, 4]) -> f32[M, 4] {\n  %w = param f32[4, 4]\n  %b = param f32[4]\n" +
         std::string(body) + "\n}\n";
}

runtime::HostTensor tensor(std::vector<int64_t> dims, std::vector<double> data) {
  return {ir::DType::F32, std::move(dims), std::move(data)};
}

// The one output of the graph `text` on x [2, 3], w [2, 3], b [2] (below).
std::vector<double> run(const std::string& text) {
  // x . W^T = [[-1, 2], [4, -2]]: each sign once per column, so relu cuts half of it.
  std::map<std::string, runtime::HostTensor> values = {
      {"x", tensor({2, 3}, {1, 0, -2, 3, -1, 1})},
      {"w", tensor({2, 3}, {1, 0, 1, 0, 1, -1})},  // W [N = 2, K = 3]
      {"b", tensor({2}, {0.5, -1.5})},
      {"r", tensor({2, 2}, {-2, 0.25, 1, -3})}};
  return runtime::reference_forward(ir::parse(text, "t.mlp"), values).at(0).data;
}

std::string graph(const std::string& stmt) {
  return "func @f(%x: f32[M, 3], %r: f32[M, 2]) -> f32[M, 2] {\n  %w = param f32[2, 3]\n"
         "  %b = param f32[2]\n" + stmt + "\n  return %y\n}\n";
}

}  // namespace

TEST_CASE("matmul epilogues print as attributes and parse back exactly", "[matmul][parser]") {
  const std::string text = dedent(R"(
    func @f(%x: bf16[M, 64], %r: bf16[M, 32]) -> (bf16[M, 32], bf16[M, 32], bf16[M, 32]) {
      %w = param bf16[32, 64]
      %b = param bf16[32]
      %h = matmul %x, %w, bias %b, act relu : bf16[M, 32]
      %y = matmul %x, %w, bias %b, residual %r : bf16[M, 32]
      %z = matmul %x, %w, bias %b, act silu, residual %h : bf16[M, 32]
      return %h, %y, %z
    })");
  ir::Graph g = ir::parse(text, "t.mlp");
  CHECK(ir::print(g) == text);
  CHECK(g.nodes[4].epilogue == ir::GemmEpilogue{.bias = true, .act = ir::Op::Relu});
  CHECK(g.nodes[5].epilogue == ir::GemmEpilogue{.bias = true, .residual = true});
  // Operands: x, W, then the bias, then the residual.
  CHECK(g.nodes[6].operands.size() == 4);
  CHECK(g.node(g.nodes[6].operands[2]).name == "b");
  CHECK(g.node(g.nodes[6].operands[3]).name == "h");
  CHECK(ir::print(ir::parse(ir::print(g), "again.mlp")) == text);
}

TEST_CASE("matmul attributes in any order print in the order they apply", "[matmul][parser]") {
  ir::Graph g = ir::parse(in_func("  %y = matmul %x, %w, residual %x, act tanh, bias %b : "
                                  "f32[M, 4]\n  return %y"),
                          "t.mlp");
  CHECK(ir::print(g).find("%y = matmul %x, %w, bias %b, act tanh, residual %x : f32[M, 4]") !=
        std::string::npos);
}

TEST_CASE("the old GEMM ops parse as sugar for matmul with an epilogue", "[matmul][parser]") {
  ir::Graph g = ir::parse(in_func("  %a = matmul_bias %x, %w, %b : f32[M, 4]\n"
                                  "  %c = matmul_bias_relu %a, %w, %b : f32[M, 4]\n"
                                  "  %d = matmul_bias_gelu_tanh %c, %w, %b : f32[M, 4]\n"
                                  "  %y = matmul_residual %d, %w, %x : f32[M, 4]\n  return %y"),
                          "old.mlp");
  CHECK(ir::print(g) == dedent(R"(
    func @f(%x: f32[M, 4]) -> f32[M, 4] {
      %w = param f32[4, 4]
      %b = param f32[4]
      %a = matmul %x, %w, bias %b : f32[M, 4]
      %c = matmul %a, %w, bias %b, act relu : f32[M, 4]
      %d = matmul %c, %w, bias %b, act gelu_tanh : f32[M, 4]
      %y = matmul %d, %w, residual %x : f32[M, 4]
      return %y
    })"));
}

TEST_CASE("parse errors: matmul epilogues", "[matmul][parser]") {
  CHECK(err(in_func("  %y = matmul %x, %w, act foo : f32[M, 4]")) ==
        "file.mlp:4:27: error: 'foo' is not a matmul epilogue activation (relu, gelu, gelu_tanh, "
        "silu, sigmoid, tanh)");
  CHECK(err(in_func("  %y = matmul %x, %w, act exp : f32[M, 4]")) ==
        "file.mlp:4:27: error: 'exp' is not a matmul epilogue activation (relu, gelu, gelu_tanh, "
        "silu, sigmoid, tanh)");
  CHECK(err(in_func("  %y = matmul %x, %w, bias %b, bias %b : f32[M, 4]")) ==
        "file.mlp:4:32: error: matmul has 'bias' twice");
  CHECK(err(in_func("  %y = matmul %x, %w, act relu, act relu : f32[M, 4]")) ==
        "file.mlp:4:33: error: matmul has 'act' twice");
  CHECK(err(in_func("  %y = matmul %x, %w, scale %b : f32[M, 4]")) ==
        "file.mlp:4:23: error: unknown matmul attribute 'scale' (expected bias, act, residual or "
        "impl)");
  CHECK(err(in_func("  %y = matmul %x, %w, %b : f32[M, 4]")) ==
        "file.mlp:4:23: error: expected a matmul attribute (bias %b, act OP, residual %r or impl "
        "NAME), got '%b'");
  CHECK(err(in_func("  %y = matmul %x, %w, bias : f32[M, 4]")) ==
        "file.mlp:4:28: error: expected a value (%name), got ':'");
  CHECK(err(in_func("  %y = matmul %x, %w, bias %x : f32[M, 4]")) ==
        "file.mlp:4:8: error: node %y (matmul %x: f32[M, 4], %w: f32[4, 4], %x: f32[M, 4]): bias "
        "operand of matmul must be f32[4], got f32[M, 4]");
  CHECK(err(in_func("  %y = matmul %x, %w, residual %b : f32[M, 4]")) ==
        "file.mlp:4:8: error: node %y (matmul %x: f32[M, 4], %w: f32[4, 4], %b: f32[4]): "
        "residual operand of matmul must be f32[M, 4], got f32[4]");
  CHECK(err(in_func("  %y = matmul_bias %x, %w : f32[M, 4]")) ==
        "file.mlp:4:8: error: 'matmul_bias' takes 3 operands, got 2");
  CHECK(err(in_func("  %y = matmul_residual %x, %w, %b : f32[M, 4]")) ==
        "file.mlp:4:8: error: node %y (matmul %x: f32[M, 4], %w: f32[4, 4], %b: f32[4]): "
        "residual operand of matmul must be f32[M, 4], got f32[4]");
}

TEST_CASE("the verifier: only matmul has an epilogue, and its operands match it", "[matmul]") {
  ir::Graph g = ir::parse(in_func("  %y = matmul %x, %w, bias %b : f32[M, 4]\n"
                                  "  %z = relu %y : f32[M, 4]\n  return %z"), "t.mlp");
  ir::Graph relu = g;
  relu.nodes[4].epilogue.bias = true;
  CHECK_THROWS_WITH(ir::verify(relu),
                    Catch::Contains("'relu' has a GEMM epilogue (bias, residual or act): only "
                                    "matmul has one"));
  ir::Graph two = g;
  two.nodes[3].epilogue.residual = true;  // says 4 operands, has 3
  CHECK_THROWS_WITH(ir::verify(two),
                    Catch::Contains("'matmul' with this epilogue takes 4 operands (x, W, bias, "
                                    "residual), got 3"));
  ir::Graph act = g;
  act.nodes[3].epilogue.act = ir::Op::Exp;
  CHECK_THROWS_WITH(ir::verify(act), Catch::Contains("'exp' is not a matmul epilogue activation"));
}

TEST_CASE("the reference computes act(x.W^T + bias) + residual", "[matmul][reference]") {
  // x . W^T = [[-1, 2], [4, -2]], b = [0.5, -1.5], r = [[-2, 0.25], [1, -3]].
  auto relu = [](double v) { return v > 0 ? v : 0.0; };
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  auto gelu_tanh = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  const double p[4] = {-1, 2, 4, -2}, b[2] = {0.5, -1.5}, r[4] = {-2, 0.25, 1, -3};
  auto expect = [&](auto f, bool bias, bool residual) {
    std::vector<double> out;
    for (int i = 0; i < 4; ++i)
      out.push_back(f(p[i] + (bias ? b[i % 2] : 0)) + (residual ? r[i] : 0));
    return out;
  };
  auto same = [](double v) { return v; };
  struct Case {
    std::string stmt;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"matmul %x, %w, act relu", expect(relu, false, false)},
      {"matmul %x, %w, act gelu_tanh", expect(gelu_tanh, false, false)},
      {"matmul %x, %w, bias %b, residual %r", expect(same, true, true)},
      {"matmul %x, %w, bias %b, act silu", expect(silu, true, false)},
      {"matmul %x, %w, bias %b, act gelu", expect(gelu, true, false)},
      // The activation comes before the residual: relu(x.W^T) + r, not relu(x.W^T + r).
      {"matmul %x, %w, act relu, residual %r", expect(relu, false, true)},
      {"matmul %x, %w, bias %b, act tanh, residual %r",
       expect([](double v) { return std::tanh(v); }, true, true)},
  };
  for (const Case& c : cases) {
    INFO(c.stmt);
    std::vector<double> got = run(graph("  %y = " + c.stmt + " : f32[M, 2]"));
    REQUIRE(got.size() == 4);
    for (int i = 0; i < 4; ++i) CHECK(got[i] == Approx(c.want[i]).epsilon(1e-12));
  }
  // Each part matters: the same graph as its unfused ops gives the same numbers.
  CHECK(run(graph("  %m = matmul %x, %w : f32[M, 2]\n  %a = relu %m : f32[M, 2]\n"
                  "  %y = add %a, %r : f32[M, 2]")) ==
        run(graph("  %y = matmul %x, %w, act relu, residual %r : f32[M, 2]")));
  CHECK(run(graph("  %y = matmul %x, %w, act relu, residual %r : f32[M, 2]")) !=
        run(graph("  %m = matmul %x, %w, residual %r : f32[M, 2]\n  %y = relu %m : f32[M, 2]")));
}

TEST_CASE("which backend runs which epilogue", "[matmul]") {
  using passes::GemmBackend;
  using passes::LtEpilogue;
  auto lt = [](ir::GemmEpilogue e) { return passes::cublaslt_epilogue(e); };
  CHECK(lt({}) == LtEpilogue::Default);
  CHECK(lt({.bias = true}) == LtEpilogue::Bias);
  CHECK(lt({.act = ir::Op::Relu}) == LtEpilogue::Relu);
  CHECK(lt({.bias = true, .act = ir::Op::Relu}) == LtEpilogue::ReluBias);
  CHECK(lt({.act = ir::Op::GeluTanh}) == LtEpilogue::Gelu);
  CHECK(lt({.bias = true, .act = ir::Op::GeluTanh}) == LtEpilogue::GeluBias);
  CHECK(lt({.residual = true}) == LtEpilogue::Default);  // C, beta = 1
  CHECK(lt({.bias = true, .residual = true}) == LtEpilogue::Bias);
  CHECK_FALSE(lt({.act = ir::Op::Gelu}));
  CHECK_FALSE(lt({.act = ir::Op::Silu}));
  CHECK_FALSE(lt({.residual = true, .act = ir::Op::Relu}));
  for (GemmBackend k : {GemmBackend::SmallGemm, GemmBackend::MmaGemm}) {
    CHECK(passes::can_run(k, {.bias = true, .act = ir::Op::Silu}));
    CHECK(passes::can_run(k, {.act = ir::Op::Gelu}));
    CHECK(passes::cannot_run(k, {.residual = true}) ==
          "the generated GEMM kernels take no residual");
  }
}

TEST_CASE("an epilogue cuBLASLt cannot run: a generated kernel, or cuBLASLt and a pointwise "
          "kernel", "[matmul]") {
  // N = 64: the CUDA-core kernel takes it whole.
  codegen::Plan one = codegen::build_plan(ir::parse(R"(
func @f(%x: f32[M, 32]) -> f32[M, 64] {
  %w = param f32[64, 32]
  %b = param f32[64]
  %y = matmul %x, %w, bias %b, act silu : f32[M, 64]
  return %y
})", "t.mlp"));
  REQUIRE(one.launches() == 1);
  const auto& k = std::get<codegen::KernelStep>(one.steps[0]);
  REQUIRE(k.as<codegen::SimtGemm>());
  CHECK(k.as<codegen::SimtGemm>()->k == 32);
  CHECK(k.ops == std::vector<std::string>{"matmul", "bias", "silu"});
  CHECK(k.source.find("mlpc_silu(v)") != std::string::npos);
  REQUIRE(one.choices.size() == 1);
  CHECK(one.choices[0].why == "generated kernel: cuBLASLt has no silu epilogue");

  // N = 40, f32: no generated GEMM kernel takes it; cuBLASLt applies the bias and relu, a
  // pointwise kernel adds the residual after them.
  codegen::Plan two = codegen::build_plan(ir::parse(R"(
func @f(%x: f32[M, 40]) -> f32[M, 40] {
  %w = param f32[40, 40]
  %b = param f32[40]
  %y = matmul %x, %w, bias %b, act relu, residual %x : f32[M, 40]
  return %y
})", "t.mlp"));
  REQUIRE(two.launches() == 2);
  const auto& g = std::get<codegen::GemmStep>(two.steps[0]);
  CHECK(g.epilogue == ir::GemmEpilogue{.bias = true, .act = ir::Op::Relu});
  CHECK(g.residual == -1);
  const auto& add = std::get<codegen::KernelStep>(two.steps[1]);
  CHECK(add.ops == std::vector<std::string>{"add"});
  CHECK(add.inputs == std::vector<int>{g.y, two.inputs[0]});
  CHECK(add.output == two.outputs[0]);
  CHECK(two.choices.at(0).why ==
        "cuBLASLt (relu(x.W^T + bias)) and a pointwise kernel: cuBLASLt adds the residual (its "
        "C) before the activation, not after relu");
}
