// The library API (mlpc/mlpc.h) on a machine without a GPU: compiling from a traced graph and
// from text, what a Module tells about itself, and every check of the caller's tensors and
// params that needs no GPU, each a one-line mlpc::Error naming the thing at fault.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/levels.h"
#include "error_of.h"
#include "mlpc/mlpc.h"

using namespace mlpc;

namespace {

// The article's GeGLU, traced as compiler/samples.cpp traces it.
ir::Graph traced_geglu() {
  Tracer t("geglu");
  Tensor x = t.input("x", DType::BF16, {kBatch, 768});
  Tensor gate = linear(x, 3072, false, "gate");  // traced in order: gate's param first
  Tensor up = linear(x, 3072, false, "up");
  Tensor h = (gelu_tanh(gate).named("act") * up).named("h");
  return t.finish({linear(h, 768, false, "down")});
}

constexpr const char* kGegluText = R"(func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
  %gate.weight = param bf16[3072, 768]
  %gate = matmul %x, %gate.weight : bf16[M, 3072]
  %up.weight = param bf16[3072, 768]
  %up = matmul %x, %up.weight : bf16[M, 3072]
  %act = gelu_tanh %gate : bf16[M, 3072]
  %h = mul %act, %up : bf16[M, 3072]
  %down.weight = param bf16[768, 3072]
  %down = matmul %h, %down.weight : bf16[M, 768]
  return %down
}
)";

// Any 16-byte aligned address: the checks tested here look at no memory.
void* fake(uintptr_t at) { return reinterpret_cast<void*>(at * 256); }

using mlpc::test::error_of;

}  // namespace

TEST_CASE("api: a traced graph compiles at -O1 and describes itself", "[api]") {
  Module m = compile(traced_geglu(), {.level = 1});
  CHECK(m.name() == "geglu");
  REQUIRE(m.inputs().size() == 1);
  CHECK(m.inputs()[0].name == "x");
  CHECK(m.inputs()[0].dtype == DType::BF16);
  CHECK(m.inputs()[0].dims == std::vector<int64_t>{kBatch, 768});
  REQUIRE(m.outputs().size() == 1);
  CHECK(m.outputs()[0].name == "down");
  CHECK(m.output_shape(0, 16) == std::vector<int64_t>{16, 768});
  std::vector<std::string> params;
  for (const TensorInfo& p : m.params()) params.push_back(p.name);
  CHECK(params == std::vector<std::string>{"gate.weight", "up.weight", "down.weight"});
  CHECK(m.params()[2].dims == std::vector<int64_t>{768, 3072});

  const std::string ir = m.ir();
  INFO(ir);
  CHECK(ir.find("%h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0(%gate, %up) : bf16[M, 3072]") !=
        std::string::npos);
  CHECK(m.fusion_report().find("mlpc_fused_gelu_tanh_mul_0: %act -> %h: fused (single user)") !=
        std::string::npos);
  CHECK(m.plan(8192).find("plan for @geglu at batch 8192: 4 launches") != std::string::npos);
  CHECK(m.explain(16).find("gemm_down") != std::string::npos);
  CHECK(m.launches(16) == 4);
  const auto sources = m.kernel_sources();
  REQUIRE(sources.size() == 1);
  CHECK(sources[0].first == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(sources[0].second.find("__global__") != std::string::npos);
  CHECK(m.nvrtc_builds_since_compile() == 0);
  CHECK_THROWS_WITH(m.output_shape(1, 16), "geglu has 1 outputs, not 2");
}

TEST_CASE("api: -O0 is one kernel per op, -O2 plans each decide batch", "[api]") {
  CHECK(compile(traced_geglu(), {.level = 0}).launches(16) == 5);  // 3 GEMMs, gelu_tanh, mul
  Module o2 = compile(traced_geglu(), {.level = 2, .decide_batches = {16, 4096}});
  CHECK(o2.plan(16).find("at batch 16:") != std::string::npos);
  CHECK(o2.plan(100000).find("at batch 100000:") != std::string::npos);
  CHECK(o2.fusion_report().find("// GEMMs: how each one runs, and why") != std::string::npos);
  // Merged on request: the concat shows in the IR.
  Module merged = compile(traced_geglu(), {.level = 2, .merge_gemms = "on"});
  CHECK(merged.ir().find("%gate_up.weight = concat %gate.weight, %up.weight") != std::string::npos);
  CHECK_THROWS_WITH(compile(traced_geglu(), {.level = 3}),
                    "optimization level 3: expected 0, 1 or 2");
  CHECK_THROWS_WITH(compile(traced_geglu(), {.level = 2, .merge_gemms = "always"}),
                    "merge_gemms 'always': expected one of auto, on, off");
  CHECK_THROWS_WITH(compile(traced_geglu(), {.decide_batches = {16, 0}}),
                    "decide_batches: 0 is not a batch size");
}

TEST_CASE("api: the levels are the CLI's", "[api]") {
  const CompileOptions o0 = options_for_level(0), o1 = options_for_level(1),
                       o2 = options_for_level(2);
  CHECK((!o0.fusion && !o0.epilogues && o0.merge_gemms == MergeGemms::Off));
  CHECK((o1.fusion && !o1.epilogues && o1.small_gemms == SmallGemms::Off));
  CHECK((o2.fusion && o2.epilogues && o2.merge_gemms == MergeGemms::Measure &&
         o2.gated_gemms == GatedGemms::Measure && o2.fp32_gemms == Fp32Gemms::Ieee));
  CHECK(options_for_level(2, {.no_fusion = true}).gated_gemms == GatedGemms::Off);
  CHECK(options_for_level(1, {.small_gemms = "mma"}).small_gemms == SmallGemms::Mma);
}

TEST_CASE("api: check_spec refuses what compile would, compiling nothing", "[api]") {
  CHECK_NOTHROW(check_spec({.level = 2, .decide_batches = {1, 8192}, .fp32_gemms = "auto"}));
  const std::pair<CompileSpec, std::string> bad[] = {
      {{.level = 3}, "optimization level 3: expected 0, 1 or 2"},
      {{.fp32_gemms = "fast"}, "fp32_gemms 'fast': expected one of auto, ieee, tf32x3"},
      {{.gated_gemms = "always"}, "gated_gemms 'always': expected one of auto, on, off, mma"},
      {{.decide_batches = {16, 0}}, "decide_batches: 0 is not a batch size"}};
  for (const auto& [spec, words] : bad) {
    const std::string msg = error_of([&] { check_spec(spec); });
    INFO(msg);
    CHECK(msg == words);
    CHECK(error_of([&] { compile(traced_geglu(), spec); }) == msg);
  }
}

TEST_CASE("api: text compiles like the traced graph and its errors say file:line:col", "[api]") {
  Module m = compile(std::string_view(kGegluText), {.level = 1});
  CHECK(m.ir() == compile(traced_geglu(), {.level = 1}).ir());
  CHECK(m.params().size() == 3);
  const std::string bad = "func @f(%x: f32[M, 8]) -> f32[M, 8] {\n  return %y\n}\n";
  const std::string msg = error_of([&] { compile(std::string_view(bad), {}, "bad.mlp"); });
  INFO(msg);
  CHECK(msg.rfind("bad.mlp:2:", 0) == 0);
  CHECK(msg.find("error:") != std::string::npos);
}

TEST_CASE("api: without a GPU, gpu_available says why and run throws one line", "[api]") {
  std::string why;
  REQUIRE_FALSE(gpu_available(&why));
  CHECK(why.rfind("no NVIDIA driver or GPU found: ", 0) == 0);
  CHECK(why.find('\n') == std::string::npos);
  Module m = compile(traced_geglu(), {.level = 1});
  const std::string msg = error_of([&] {
    m.run({{fake(1), DType::BF16, {16, 768}}}, {{fake(2), DType::BF16, {16, 768}}});
  });
  CHECK(msg == "cannot run geglu: " + why);
  const std::vector<uint16_t> w(768 * 3072);
  CHECK(error_of([&] { m.set_param("down.weight", w.data(), DType::BF16, {768, 3072}); }) ==
        "cannot set a param of geglu: " + why);
  CHECK(error_of([&] { m.bind_param("down.weight", {fake(3), DType::BF16, {768, 3072}}); }) ==
        "cannot bind a param of geglu: " + why);
}

TEST_CASE("api: param checks name the param, before any GPU is needed", "[api]") {
  Module m = compile(traced_geglu(), {.level = 1});
  const std::vector<float> w(768 * 3072);
  CHECK(error_of([&] { m.set_param("down.bias", w.data(), DType::F32, {768}); }) ==
        "geglu has no param down.bias (its params: gate.weight, up.weight, down.weight)");
  CHECK(error_of([&] { m.set_param("down.weight", w.data(), DType::F32, {3072, 768}); }) ==
        "param down.weight: expected shape [768, 3072], got [3072, 768]");
  CHECK(error_of([&] { m.set_param("down.weight", w.data(), DType::F16, {768, 3072}); }) ==
        "param down.weight: expected bf16 values (or f32), got f16");
  CHECK(error_of([&] { m.set_param("down.weight", nullptr, DType::F32, {768, 3072}); }) ==
        "param down.weight: null pointer");
  const std::vector<double> d(768 * 3072);
  CHECK(error_of([&] { m.set_param_f64("up.weight", d.data(), {3072}); }) ==
        "param up.weight: expected shape [3072, 768], got [3072]");
  CHECK(error_of([&] { m.bind_param("gate.weight", {fake(1), DType::F32, {3072, 768}}); }) ==
        "param gate.weight: expected bf16 values, got f32");
}

TEST_CASE("api: run checks counts, pointers, dtypes, shapes and one batch", "[api]") {
  Module m = compile(traced_geglu(), {.level = 1});
  const TensorRef y{fake(9), DType::BF16, {16, 768}};
  CHECK(error_of([&] { m.run({}, {y}); }) == "expected 1 input (x), got 0");
  CHECK(error_of([&] {
          m.run({{fake(1), DType::BF16, {16, 768}}}, {y, y});
        }) == "expected 1 output (down), got 2");
  CHECK(error_of([&] { m.run({{nullptr, DType::BF16, {16, 768}}}, {y}); }) ==
        "input x: null pointer");
  CHECK(error_of([&] {
          m.run({{reinterpret_cast<void*>(0x1002), DType::BF16, {16, 768}}}, {y});
        }) == "input x: pointer 0x1002 is not 16-byte aligned");
  CHECK(error_of([&] { m.run({{fake(1), DType::F32, {16, 768}}}, {y}); }) ==
        "input x: expected bf16[M, 768], got f32[16, 768]");
  CHECK(error_of([&] { m.run({{fake(1), DType::BF16, {16, 767}}}, {y}); }) ==
        "input x: expected bf16[M, 768], got bf16[16, 767]");
  CHECK(error_of([&] { m.run({{fake(1), DType::BF16, {16}}}, {y}); }) ==
        "input x: expected bf16[M, 768], got bf16[16]");
  CHECK(error_of([&] {
          m.run({{fake(1), DType::BF16, {8, 768}}}, {y});
        }) == "output down: batch 16 differs from the 8 rows of the tensors before");
}
