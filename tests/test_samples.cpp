// The built-in samples: traced and text forms agree, and each compiles to the expected plan.
#include <catch2/catch.hpp>

#include "compiler/compile.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace mlpc;

namespace {

std::vector<std::string> kinds(const codegen::Plan& p) {
  std::vector<std::string> k;
  for (const codegen::Step& s : p.steps)
    k.push_back(std::holds_alternative<codegen::GemmStep>(s) ? "gemm" : "pointwise");
  return k;
}

}  // namespace

TEST_CASE("each sample's .mlp file is the traced graph", "[samples]") {
  for (const SampleInfo& s : samples()) {
    INFO(s.name);
    ir::Graph file = ir::parse_file(std::string(MLPC_SAMPLES_SOURCE_DIR) + "/" + s.name + ".mlp");
    CHECK(ir::print(file) == ir::print(make_sample(s.name)));
  }
}

TEST_CASE("sample plans: launches fused and eager", "[samples]") {
  struct Expect {
    std::string name;
    std::vector<std::string> fused;
    int eager;
  };
  const std::vector<Expect> cases = {
      {"linear", {"gemm", "pointwise"}, 2},
      {"geglu", {"gemm", "gemm", "pointwise", "gemm"}, 5},
      {"mlp3", {"gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise"}, 8},
      {"mlp3_small", {"gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise"}, 8},
      {"llama_geglu", {"gemm", "gemm", "pointwise", "gemm"}, 5},
  };
  for (const Expect& e : cases) {
    INFO(e.name);
    CompiledGraph fused = compile(make_sample(e.name), {.fusion = true, .build_kernels = false});
    CompiledGraph eager = compile(make_sample(e.name), {.fusion = false, .build_kernels = false});
    CHECK(kinds(fused.plan) == e.fused);
    CHECK(eager.plan.launches() == e.eager);
  }
}

TEST_CASE("geglu's one pointwise kernel computes gelu_tanh then mul", "[samples]") {
  CompiledGraph c = compile(make_sample("geglu"), {.build_kernels = false});
  const auto& k = std::get<codegen::KernelStep>(c.plan.steps[2]);
  CHECK(k.name == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(k.ops == std::vector<std::string>{"gelu_tanh", "mul"});
  CHECK(k.vec == 8);  // bf16: 16-byte accesses
}

TEST_CASE("mlp3 keeps exact GELU: bias and gelu fuse, never a tanh approximation", "[samples]") {
  CompiledGraph c = compile(make_sample("mlp3"), {.build_kernels = false});
  const auto& k = std::get<codegen::KernelStep>(c.plan.steps[1]);
  CHECK(k.ops == std::vector<std::string>{"add", "gelu"});
  CHECK(k.source.find("erff(") != std::string::npos);
  CHECK(k.source.find("tanhf(") == std::string::npos);
}
