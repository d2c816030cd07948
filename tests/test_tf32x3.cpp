// 3xTF32 GEMMs (codegen/tf32x3.h, tf32x3_plan.h, `--fp32-gemms`): the TF32 rounding and the split
// layout, which plans take the rewrite and what they look like (the producing pointwise kernel
// storing the parts itself, or a split kernel of its own shared by the GEMMs of one input), the
// decision rule, and NVRTC builds of every kernel involved. The numbers are checked on the GPU by
// tests/gpu/test_gpu_tf32x3.cpp.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "codegen/tf32x3.h"
#include "codegen/tf32x3_plan.h"
#include "runtime/tolerance.h"
#include "compiler/compile.h"
#include "compiler/report.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device.h"
#include "runtime/nvrtc_compiler.h"

using namespace mlpc;

TEST_CASE("tf32_round keeps 10 mantissa bits, to nearest, ties away, finite stays finite",
          "[tf32x3]") {
  using codegen::tf32_round;
  CHECK(tf32_round(1.0f) == 1.0f);
  CHECK(tf32_round(1.0f + 0x1p-12f) == 1.0f);             // below half an ulp (2^-10)
  CHECK(tf32_round(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);  // a tie: away from zero
  CHECK(tf32_round(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
  CHECK(tf32_round(1.0f + 0x1p-10f + 0x1p-12f) == 1.0f + 0x1p-10f);
  const float big = std::numeric_limits<float>::max();
  CHECK(std::isfinite(tf32_round(big)));
  CHECK(std::isinf(tf32_round(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(tf32_round(std::numeric_limits<float>::quiet_NaN())));
  CHECK(tf32_round(0.0f) == 0.0f);

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const float v = u(rng);
    const float hi = tf32_round(v), lo = tf32_round(v - hi);
    CHECK((std::bit_cast<uint32_t>(hi) & 0x1fffu) == 0u);
    CHECK((std::bit_cast<uint32_t>(lo) & 0x1fffu) == 0u);
    CHECK(std::fabs(v - hi) <= std::ldexp(std::fabs(v), -11));
    // The two parts hold v to ~22 bits: what 3xTF32 keeps of each operand.
    CHECK(std::fabs(static_cast<double>(v) - hi - lo) <= std::ldexp(std::fabs(v), -21));
  }
}

TEST_CASE("split_tf32x3 lays the parts side by side along each row", "[tf32x3]") {
  const float a = 1.0f + 0x1p-13f, b = -3.0f, c = 0.1f, d = 7.0f;
  const std::vector<float> parts = codegen::split_tf32x3({a, b, c, d}, 2, 2, 1);
  REQUIRE(parts.size() == 12);
  auto hi = [](float v) { return codegen::tf32_round(v); };
  auto lo = [&](float v) { return codegen::tf32_round(v - hi(v)); };
  // Row 0: [hi a, hi b | lo a, lo b | hi a, hi b]; row 1 the same for c, d.
  CHECK(parts == std::vector<float>{hi(a), hi(b), lo(a), lo(b), hi(a), hi(b),  //
                                    hi(c), hi(d), lo(c), lo(d), hi(c), hi(d)});
  CHECK(lo(a) == 0x1p-13f);
}

namespace {

CompileOptions tf32_options(Fp32Gemms mode, int opt = 2) {
  CompileOptions o{.fusion = true, .epilogues = opt >= 2, .arch = "sm_90", .build_kernels = false,
                   .measure_epilogues = false};
  o.fp32_gemms = mode;
  return o;
}

const codegen::Buffer& buffer(const codegen::Plan& p, int i) {
  return p.buffers[static_cast<size_t>(i)];
}

}  // namespace

TEST_CASE("3xTF32: mlp3's GEMMs read split buffers, the GELU kernels write them", "[tf32x3]") {
  const ir::Graph g = make_sample("mlp3");
  const CompiledGraph c = compile(g, tf32_options(Fp32Gemms::Tf32x3));
  const codegen::Plan& p = c.plan;
  // One split kernel for the graph's input, then each GEMM; the GELU kernels store the parts.
  CHECK(plan_text(c, 8192).find("6 launches") != std::string::npos);
  REQUIRE(p.steps.size() == 6);
  const auto& split = std::get<codegen::KernelStep>(p.steps[0]);
  CHECK(split.name == "split_tf32x3_x");
  CHECK(split.tf32x3_store);
  CHECK(split.ops == std::vector<std::string>{"split_tf32x3"});
  CHECK(buffer(p, split.inputs[0]).name == "x");
  CHECK(buffer(p, split.output).name == "x.tf32x3");
  CHECK(ir::to_string(buffer(p, split.output).type) == "f32[M, 3072]");
  for (size_t i : {1, 3, 5}) {
    const auto& gemm = std::get<codegen::GemmStep>(p.steps[i]);
    INFO(gemm.name);
    CHECK(gemm.tf32x3);
    CHECK(gemm.stored_k() == 3 * gemm.k);
    CHECK(buffer(p, gemm.x).type.shape.last() == 3 * gemm.k);
    const codegen::Buffer& w = buffer(p, gemm.w);
    CHECK(w.role == codegen::BufferRole::Param);
    CHECK_FALSE(w.uploaded());
    REQUIRE(w.split_of >= 0);
    CHECK(w.name == buffer(p, w.split_of).name + ".tf32x3");
    CHECK(buffer(p, w.split_of).uploaded());
    CHECK(w.type.shape.dims == std::vector<int64_t>{gemm.n, 3 * gemm.k});
  }
  for (size_t i : {2, 4}) {
    const auto& gelu = std::get<codegen::KernelStep>(p.steps[i]);
    CHECK(gelu.tf32x3_store);
    CHECK(gelu.ops == std::vector<std::string>{"gelu"});
    CHECK(buffer(p, gelu.output).name == (i == 2 ? "h1.tf32x3" : "h2.tf32x3"));
    CHECK(gelu.source.find("mlpc_store_tf32x3<kVec>(out, i, kRowLen, y)") != std::string::npos);
  }
  // h1 and h2 themselves are never written: they left the plan.
  for (const codegen::Buffer& b : p.buffers) CHECK((b.name != "h1" && b.name != "h2"));
  REQUIRE(p.choices.size() >= 3);
  CHECK(p.choices.back().why == "3xTF32 (--fp32-gemms tf32x3)");
}

TEST_CASE("3xTF32: mlp3's plan (golden)", "[tf32x3]") {
  // Bytes: the split kernel reads x and writes its three parts; each GELU kernel reads fc and
  // writes h's three parts; each GEMM reads x3 and w3 (3K wide) and writes y.
  const CompiledGraph c = compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Tf32x3));
  CHECK(plan_text(c, 8192) ==
        "plan for @mlp3 at batch 8192: 6 launches\n"
        "   0. pointwise split_tf32x3_x                   split_tf32x3                134.22 MB\n"
        "   1. gemm      gemm_fc1                         matmul_bias+tf32x3          285.23 MB  68.72 GFLOP\n"
        "   2. pointwise mlpc_gelu_0                      gelu                        536.87 MB\n"
        "   3. gemm      gemm_fc2                         matmul_bias+tf32x3          738.21 MB  274.88 GFLOP\n"
        "   4. pointwise mlpc_gelu_1                      gelu                        536.87 MB\n"
        "   5. gemm      gemm_fc3                         matmul_bias+tf32x3          486.54 MB  68.72 GFLOP\n");
}

TEST_CASE("3xTF32: GEMMs of one input share one split kernel, other reads keep the value",
          "[tf32x3]") {
  const ir::Graph g = ir::parse(R"(func @two(%x: f32[M, 64]) -> f32[M, 32] {
  %wa = param f32[32, 64]
  %wb = param f32[32, 64]
  %a = matmul %x, %wa : f32[M, 32]
  %b = matmul %x, %wb : f32[M, 32]
  %h = relu %a : f32[M, 32]
  %s = add %h, %b : f32[M, 32]
  %wc = param f32[32, 32]
  %y = matmul %s, %wc : f32[M, 32]
  %z = add %y, %s : f32[M, 32]
  return %z
})", "two.mlp");
  const CompiledGraph c = compile(g, tf32_options(Fp32Gemms::Tf32x3, 1));
  const codegen::Plan& p = c.plan;
  int splits = 0, gemms = 0;
  for (const codegen::Step& s : p.steps) {
    if (auto* k = std::get_if<codegen::KernelStep>(&s); k && k->tf32x3_store) {
      ++splits;
      // %s is read by the add after its GEMM too, so its kernel keeps writing it and a split
      // kernel makes the GEMM's parts.
      CHECK(k->ops == std::vector<std::string>{"split_tf32x3"});
    }
    if (auto* gm = std::get_if<codegen::GemmStep>(&s)) {
      ++gemms;
      CHECK(gm->tf32x3);
    }
  }
  CHECK(gemms == 3);
  CHECK(splits == 2);  // one for %x (two GEMMs), one for %s
  CHECK(p.launches() == 3 + 2 + 2);
}

TEST_CASE("3xTF32: only f32 cuBLASLt GEMMs, IEEE by default and without a GPU to measure",
          "[tf32x3]") {
  for (const char* sample : {"geglu", "llama_geglu"}) {  // bf16: nothing to split
    const CompiledGraph c = compile(make_sample(sample), tf32_options(Fp32Gemms::Tf32x3));
    for (const codegen::Step& s : c.plan.steps)
      if (auto* gm = std::get_if<codegen::GemmStep>(&s)) CHECK_FALSE(gm->tf32x3);
  }
  const ir::Graph g = make_sample("mlp3");
  for (Fp32Gemms mode : {Fp32Gemms::Ieee, Fp32Gemms::Measure}) {
    if (mode == Fp32Gemms::Measure && !runtime::gpu_unavailable_reason()) continue;
    const CompiledGraph c = compile(g, tf32_options(mode));
    CHECK(c.plan.launches() == 5);
    for (const codegen::Step& s : c.plan.steps)
      if (auto* gm = std::get_if<codegen::GemmStep>(&s)) CHECK_FALSE(gm->tf32x3);
    if (mode == Fp32Gemms::Measure) {
      REQUIRE_FALSE(c.plan.choices.empty());
      CHECK(c.plan.choices.back().why == "IEEE fp32: no GPU to measure on");
    }
  }
}

TEST_CASE("3xTF32 decision rule: taken only when measurably faster", "[tf32x3]") {
  CHECK(decide_tf32x3(3000.0, 5400.0, 8192).use_kernel);
  CHECK_FALSE(decide_tf32x3(99.0, 100.0, 64).use_kernel);  // within noise: IEEE kept
  CHECK_FALSE(decide_tf32x3(0.0, 100.0, 64).use_kernel);
  CHECK(decide_tf32x3(3000.0, 5400.0, 8192).why ==
        "3xTF32: measured at M=8192 in a CUDA graph: 3000.0 us as 3xTF32 (split included) vs "
        "5400.0 us as an IEEE fp32 GEMM");
}

TEST_CASE("3xTF32 kernels compile with NVRTC, vector and scalar stores", "[tf32x3][nvrtc]") {
  // mlp3 (K multiples of 4: 16-byte stores) and a graph whose rows have 6 elements (scalar).
  const ir::Graph odd = ir::parse(R"(func @odd(%x: f32[M, 6]) -> f32[M, 5] {
  %w = param f32[5, 6]
  %g = gelu %x : f32[M, 6]
  %y = matmul %g, %w : f32[M, 5]
  return %y
})", "odd.mlp");
  for (const ir::Graph* g : {&odd}) {
    CompileOptions o = tf32_options(Fp32Gemms::Tf32x3, 1);
    o.build_kernels = true;
    o.use_cache = false;
    const CompiledGraph c = compile(*g, o);
    int stores = 0;
    for (const codegen::Step& s : c.plan.steps)
      if (auto* k = std::get_if<codegen::KernelStep>(&s); k && k->tf32x3_store) {
        ++stores;
        CHECK(k->vec == 1);
        CHECK(c.cubins.count(k->name) == 1);
      }
    CHECK(stores == 1);  // the gelu kernel stores the parts: no split kernel
  }
  CompileOptions o = tf32_options(Fp32Gemms::Tf32x3);
  o.build_kernels = true;
  o.use_cache = false;
  const CompiledGraph c = compile(make_sample("mlp3"), o);
  CHECK(c.cubins.size() == 3);
  CHECK(c.cache_misses == 3);
}

TEST_CASE("3xTF32 results are checked with their own, wider f32 floor", "[tf32x3]") {
  const runtime::Tolerance ieee = runtime::tolerance_for(ir::DType::F32, 4096, 5);
  const runtime::Tolerance split = runtime::tolerance_for(ir::DType::F32, 4096, 5, true);
  CHECK(split.rtol == ieee.rtol);
  CHECK(split.floor > 8 * ieee.floor);
  CHECK(split.floor < 16 * ieee.floor);
  // Only f32 GEMMs are split: a bf16 graph's tolerance does not move.
  CHECK(runtime::tolerance_for(ir::DType::BF16, 4096, 5, true).floor ==
        runtime::tolerance_for(ir::DType::BF16, 4096, 5).floor);
  CHECK(codegen::has_tf32x3_gemm(compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Tf32x3)).plan));
  CHECK_FALSE(codegen::has_tf32x3_gemm(compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Ieee)).plan));
}
