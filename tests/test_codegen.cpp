// Codegen: every kernel of every sample, fused and eager, in every dtype, compiles with NVRTC for
// sm_90 (no GPU needed); and the generated source makes the choices it should.
#include <catch2/catch.hpp>

#include "codegen/plan_builder.h"
#include "codegen/pointwise_kernel.h"
#include "compiler/compile.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "passes/pipeline.h"

using namespace mlpc;

namespace {

codegen::KernelStep only_kernel(const std::string& text) {
  passes::PipelineResult r = passes::run_pipeline(ir::parse(text, "k.mlp"), {});
  codegen::Plan p = codegen::build_plan(r.graph);
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s)) return *k;
  FAIL("no kernel");
  return {};
}

}  // namespace

TEST_CASE("every sample kernel compiles with NVRTC for sm_90", "[codegen][nvrtc]") {
  for (const SampleInfo& s : samples())
    for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
      for (bool fusion : {true, false}) {
        INFO(s.name << " " << ir::dtype_name(dt) << (fusion ? " fused" : " eager"));
        CompiledGraph c = compile(with_dtype(make_sample(s.name), dt),
                                  {.fusion = fusion, .arch = "sm_90", .use_cache = false});
        for (const auto& [name, cubin] : c.cubins) {
          INFO(name);
          REQUIRE(cubin.size() > 4);
          CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
        }
      }
}

TEST_CASE("bf16 with a row vector whose length divides by 8: 16-byte accesses", "[codegen]") {
  codegen::KernelStep k = only_kernel(R"(
func @f(%x: bf16[M, 3072]) -> bf16[M, 3072] {
  %b = param bf16[3072]
  %y = add %x, %b : bf16[M, 3072]
  %z = gelu_tanh %y : bf16[M, 3072]
  return %z
})");
  CHECK(k.vec == 8);
  CHECK(k.row_len == 3072);
  CHECK(k.source.find("mlpc_load<kVec>(in1 + (i % kRowLen)") != std::string::npos);
  CHECK(k.source.find("//   %y = add %x, %b") != std::string::npos);
  CHECK(k.source.find("//   %z = gelu_tanh %y") != std::string::npos);
}

TEST_CASE("a row vector of odd length forces the scalar kernel", "[codegen]") {
  codegen::KernelStep k = only_kernel(R"(
func @f(%x: f32[M, 7]) -> f32[M, 7] {
  %b = param f32[7]
  %y = add %x, %b : f32[M, 7]
  return %y
})");
  CHECK(k.vec == 1);
  CHECK(k.source.find("mlpc_load") == std::string::npos);
}

TEST_CASE("full tensors of odd length keep vectors and add a scalar tail", "[codegen]") {
  codegen::KernelStep k = only_kernel(R"(
func @f(%x: f16[M, 7], %z: f16[M, 7]) -> f16[M, 7] {
  %y = mul %x, %z : f16[M, 7]
  return %y
})");
  CHECK(k.vec == 8);
  CHECK(k.source.find("Scalar tail") != std::string::npos);
}

TEST_CASE("mixed dtypes: the narrowest type sets the vector width", "[codegen]") {
  codegen::KernelStep k = only_kernel(R"(
func @f(%x: f32[M, 64]) -> bf16[M, 64] {
  %y = relu %x : f32[M, 64]
  %z = cast %y : bf16[M, 64]
  return %z
})");
  CHECK(k.vec == 8);  // 8 bf16 = 16 bytes; the f32 input takes two 16-byte loads
  CHECK(k.source.find("__float2bfloat16_rn") != std::string::npos);
}

TEST_CASE("launch dims cover the tensor once and cap huge grids", "[codegen]") {
  codegen::KernelStep k;
  k.vec = 8;
  const codegen::Elementwise e;
  CHECK(codegen::launch_dims(e, k, 8).grid == 1);
  CHECK(codegen::launch_dims(e, k, 8 * 256 + 1).grid == 2);
  CHECK(codegen::launch_dims(e, k, int64_t{1} << 34).grid == 132 * 32);
}
