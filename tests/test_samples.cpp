// The built-in samples: traced and text forms agree (every samples/*.mlp is one), and each
// compiles to the expected plan.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "compiler/compile.h"
#include "compiler/levels.h"
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

ir::Graph sample_file(const std::string& name) {
  return ir::parse_file(std::string(MLPC_SAMPLES_SOURCE_DIR) + "/" + name + ".mlp");
}

}  // namespace

TEST_CASE("each sample's .mlp file is the traced graph", "[samples]") {
  for (const SampleInfo& s : samples()) {
    INFO(s.name);
    ir::Graph file = sample_file(s.name);
    CHECK(ir::print(file) == ir::print(make_sample(s.name)));
  }
}

TEST_CASE("each .mlp file in samples/ is a built-in sample", "[samples]") {
  std::set<std::string> builtin;
  for (const SampleInfo& s : samples()) builtin.insert(s.name);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(MLPC_SAMPLES_SOURCE_DIR)) {
    if (e.path().extension() != ".mlp") continue;
    const std::string name = e.path().stem().string();
    INFO(name);
    CHECK(builtin.count(name) == 1);
    CHECK(sample_file(name).name == name);
    ++files;
  }
  CHECK(files == static_cast<int>(builtin.size()));
}

TEST_CASE("sample plans: launches fused, eager, and as one fused.mlp region", "[samples]") {
  struct Expect {
    std::string name;
    std::vector<std::string> fused;
    int eager;
    bool one_region = false;  // -O2 with --fused-mlp on (sm_90): the whole MLP one launch
  };
  // tiny-cuda-nn's MLPs: no bias, so each ReLU is a kernel of its own after its GEMM.
  const std::vector<std::string> tcnn5 = {"gemm", "pointwise", "gemm", "pointwise", "gemm",
                                          "pointwise", "gemm", "pointwise", "gemm", "pointwise",
                                          "gemm"};
  const std::vector<Expect> cases = {
      {"linear", {"gemm", "pointwise"}, 2},
      {"geglu", {"gemm", "gemm", "pointwise", "gemm"}, 5},
      {"mlp3", {"gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise"}, 8},
      {"mlp3_small", {"gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise"}, 8, true},
      {"llama_geglu", {"gemm", "gemm", "pointwise", "gemm"}, 5},
      {"tcnn_w64", tcnn5, 11, true},
      {"tcnn_w128", tcnn5, 11, true},
      {"tcnn_w32", {"gemm", "pointwise", "gemm", "pointwise", "gemm"}, 5, true},
      // bias add and gelu_tanh fuse: 4 GEMMs, 3 add+gelu_tanh kernels and the last bias add
      {"narrow_gelu",
       {"gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise", "gemm", "pointwise"},
       11, true},
  };
  CompileOptions whole = options_for_level(2, {.fused_mlp = "on"});
  whole.arch = "sm_90";
  whole.build_kernels = false;
  whole.measure_epilogues = false;
  for (const Expect& e : cases) {
    INFO(e.name);
    CompiledGraph fused = compile(make_sample(e.name), {.fusion = true, .build_kernels = false});
    CompiledGraph eager = compile(make_sample(e.name), {.fusion = false, .build_kernels = false});
    CHECK(kinds(fused.plan) == e.fused);
    CHECK(eager.plan.launches() == e.eager);
    if (e.one_region) CHECK(compile(make_sample(e.name), whole).plan.launches() == 1);
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
