// 3xTF32 GEMMs (codegen/tf32x3.h, tf32x3_plan.h, `--fp32-gemms`): the TF32 rounding and the split
// layout, which plans take the rewrite and what they look like (the producing pointwise kernel
// storing the parts itself, or a split kernel of its own shared by the GEMMs of one input), the
// decision rule, and NVRTC builds of every kernel involved. The numbers are checked on the GPU by
// tests/gpu/test_gpu_tf32x3.cpp.
#include <catch2/catch.hpp>

#include "passes/kernel_rules.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "codegen/tf32x3.h"
#include "codegen/tf32x3_plan.h"
#include "runtime/reference/tolerance.h"
#include "compiler/compile.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "tf32x3_graphs.h"

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
  const std::vector<float> parts = codegen::split_tf32x3({a, b, c, d}, 2, 2, 1, 2);
  REQUIRE(parts.size() == 12);
  auto hi = [](float v) { return codegen::tf32_round(v); };
  auto lo = [&](float v) { return codegen::tf32_round(v - hi(v)); };
  // Row 0: [hi a, hi b | lo a, lo b | hi a, hi b]; row 1 the same for c, d.
  CHECK(parts == std::vector<float>{hi(a), hi(b), lo(a), lo(b), hi(a), hi(b),  //
                                    hi(c), hi(d), lo(c), lo(d), hi(c), hi(d)});
  CHECK(lo(a) == 0x1p-13f);
}

TEST_CASE("split_tf32x3 lays each K-chunk's parts side by side", "[tf32x3]") {
  const std::vector<float> v{1.0f + 0x1p-13f, 2.0f + 0x1p-12f, 0.3f, -0.7f};
  const std::vector<float> parts = codegen::split_tf32x3(v, 1, 4, 0, 2);
  auto hi = [](float x) { return codegen::tf32_round(x); };
  auto lo = [&](float x) { return codegen::tf32_round(x - hi(x)); };
  // Chunk 0 = v0, v1; chunk 1 = v2, v3: [lo lo | hi hi | hi hi] each.
  CHECK(parts == std::vector<float>{lo(v[0]), lo(v[1]), hi(v[0]), hi(v[1]), hi(v[0]), hi(v[1]),
                                    lo(v[2]), lo(v[3]), hi(v[2]), hi(v[3]), hi(v[2]), hi(v[3])});
}

TEST_CASE("3xTF32 K-chunks: at most 512 and a quarter of K, multiples of 64, K >= 256",
          "[tf32x3]") {
  using codegen::tf32x3_chunk_k;
  CHECK(tf32x3_chunk_k(4096) == 512);
  CHECK(tf32x3_chunk_k(3072) == 512);
  CHECK(tf32x3_chunk_k(2048) == 512);
  CHECK(tf32x3_chunk_k(1024) == 256);
  CHECK(tf32x3_chunk_k(768) == 192);
  CHECK(tf32x3_chunk_k(512) == 128);
  CHECK(tf32x3_chunk_k(256) == 64);
  CHECK(tf32x3_chunk_k(4160) == 320);  // 65 x 64: the largest aligned divisor <= 512
  CHECK(tf32x3_chunk_k(128) == 0);     // below the smallest K measured
  CHECK(tf32x3_chunk_k(1000) == 0);    // no multiple of 64 divides it
  CHECK(tf32x3_chunk_k(60) == 0);
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

TEST_CASE("3xTF32: mlp3's GEMMs run in K-chunks over split buffers the GELU kernels write",
          "[tf32x3]") {
  const ir::Graph g = make_sample("mlp3");
  const CompiledGraph c = compile(g, tf32_options(Fp32Gemms::Tf32x3));
  const codegen::Plan& p = c.plan;
  // A split kernel for the graph's input; fc1 (K = 1024) in 4 chunks of 256, the GELU kernel
  // storing h1's parts, fc2 (K = 4096) in 8 chunks of 512, h2's GELU kernel, fc3 in 8 chunks.
  CHECK(plan_text(c, 8192).find("23 launches") != std::string::npos);
  REQUIRE(p.steps.size() == 23);
  const auto& split = std::get<codegen::KernelStep>(p.steps[0]);
  CHECK(split.name == "split_tf32x3_x");
  CHECK(split.store() == codegen::Store::Tf32x3Split);
  CHECK(split.ops == std::vector<std::string>{"split_tf32x3"});
  CHECK(buffer(p, split.inputs[0]).name == "x");
  CHECK(buffer(p, split.output).name == "x.tf32x3");
  CHECK(buffer(p, split.output).split_chunk == 256);
  CHECK(ir::to_string(buffer(p, split.output).type) == "f32[M, 3072]");
  struct Gemm {
    size_t first;
    int chunks;
    int64_t k, chunk;
    const char* name;
  };
  for (const Gemm& want : {Gemm{1, 4, 1024, 256, "gemm_fc1"}, Gemm{6, 8, 4096, 512, "gemm_fc2"},
                           Gemm{15, 8, 4096, 512, "gemm_fc3"}}) {
    for (int j = 0; j < want.chunks; ++j) {
      const auto& gemm = std::get<codegen::GemmStep>(p.steps[want.first + j]);
      INFO(gemm.name);
      CHECK(gemm.name == fmt::format("{}.k{}", want.name, j));
      CHECK(gemm.tf32x3);
      CHECK_FALSE(codegen::tf32x3_below_ieee(gemm));
      CHECK(gemm.k == want.chunk);
      CHECK(gemm.k_begin == 3 * want.chunk * j);
      CHECK(gemm.row_stride == 3 * want.k);
      CHECK(gemm.accumulate == (j > 0));
      CHECK(gemm.residual == -1);
      // The bias is added once, to the sum: by the last chunk's epilogue.
      const bool last = j + 1 == want.chunks;
      CHECK(gemm.epilogue == (last ? ir::GemmEpilogue{.bias = true} : ir::GemmEpilogue{}));
      CHECK((gemm.bias >= 0) == last);
      CHECK(buffer(p, gemm.x).type.shape.last() == 3 * want.k);
      const codegen::Buffer& w = buffer(p, gemm.w);
      CHECK(w.role == codegen::BufferRole::Param);
      CHECK_FALSE(w.uploaded());
      REQUIRE(w.split_of >= 0);
      CHECK(w.split_chunk == want.chunk);
      CHECK(w.name == buffer(p, w.split_of).name + ".tf32x3");
      CHECK(buffer(p, w.split_of).uploaded());
      CHECK(w.type.shape.dims == std::vector<int64_t>{gemm.n, 3 * want.k});
    }
  }
  for (size_t i : {5, 14}) {
    const auto& gelu = std::get<codegen::KernelStep>(p.steps[i]);
    CHECK(gelu.store() == codegen::Store::Tf32x3Split);
    CHECK(gelu.ops == std::vector<std::string>{"gelu"});
    CHECK(buffer(p, gelu.output).name == (i == 5 ? "h1.tf32x3" : "h2.tf32x3"));
    CHECK(gelu.source.find("constexpr long long kChunk = 512;") != std::string::npos);
    CHECK(gelu.source.find("mlpc_store_tf32x3<kVec>(out, i, kRowLen, kChunk, y)") !=
          std::string::npos);
  }
  // h1 and h2 themselves are never written: they left the plan.
  for (const codegen::Buffer& b : p.buffers) CHECK((b.name != "h1" && b.name != "h2"));
  // Every chunk is IEEE-class: the plan is checked with IEEE fp32's tolerance.
  CHECK_FALSE(codegen::needs_tf32x3_tolerance(p));
  REQUIRE(p.choices.size() >= 3);
  CHECK(p.choices.back().why == "3xTF32 (--fp32-gemms tf32x3), K in 8 chunks of 512");
}

TEST_CASE("3xTF32 K-chunks: the residual enters with the first chunk and a nonlinear epilogue "
          "with the last",
          "[tf32x3]") {
  const ir::Graph g = ir::parse(testing::kChunkedTf32x3, "chunked.mlp");
  const CompiledGraph c = compile(g, tf32_options(Fp32Gemms::Tf32x3));
  const codegen::Plan& p = c.plan;
  int relu_bias = 0, residual = 0, gemms = 0;
  for (const codegen::Step& s : p.steps) {
    const auto* gm = std::get_if<codegen::GemmStep>(&s);
    if (!gm) continue;
    INFO(gm->name);
    ++gemms;
    CHECK_FALSE(codegen::tf32x3_below_ieee(*gm));
    CHECK(gm->k == gm->row_stride / 12);  // four chunks each: K 512 -> 128, K 256 -> 64
    const bool first = gm->k_begin == 0;
    CHECK(gm->accumulate == !first);
    if (gm->residual >= 0) {
      ++residual;
      CHECK(first);
      CHECK(gm->epilogue.residual);
    } else {
      CHECK_FALSE(gm->epilogue.residual);
    }
    if (gm->epilogue == ir::GemmEpilogue{.bias = true, .act = ir::Op::Relu}) {
      ++relu_bias;
      CHECK_FALSE(first);
    }
  }
  CHECK(gemms == 12);
  CHECK(relu_bias == 1);
  CHECK(residual == 1);
  CHECK_FALSE(codegen::needs_tf32x3_tolerance(p));
}

TEST_CASE("3xTF32: mlp3's plan (golden)", "[tf32x3]") {
  // Bytes: the split kernel reads x and writes its three parts; each GELU kernel reads fc and
  // writes h's three parts; each K-chunk reads its 3 x 256 (fc1) or 3 x 512 columns of x3 and
  // w3 and writes y,
  // reading it first when it adds to it (accumulate); the last adds the bias.
  const CompiledGraph c = compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Tf32x3));
  CHECK(plan_text(c, 8192) ==
        "plan for @mlp3 at batch 8192: 23 launches\n"
        "   0. pointwise split_tf32x3_x                   split_tf32x3                            134.22 MB\n"
        "   1. gemm      gemm_fc1.k0                      matmul+tf32x3                           171.97 MB  17.18 GFLOP\n"
        "   2. gemm      gemm_fc1.k1                      matmul+tf32x3+accumulate                306.18 MB  17.18 GFLOP\n"
        "   3. gemm      gemm_fc1.k2                      matmul+tf32x3+accumulate                306.18 MB  17.18 GFLOP\n"
        "   4. gemm      gemm_fc1.k3                      matmul+bias+tf32x3+accumulate           306.20 MB  17.18 GFLOP\n"
        "   5. pointwise mlpc_gelu_0                      gelu                                    536.87 MB\n"
        "   6. gemm      gemm_fc2.k0                      matmul+tf32x3                           209.72 MB  34.36 GFLOP\n"
        "   7. gemm      gemm_fc2.k1                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "   8. gemm      gemm_fc2.k2                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "   9. gemm      gemm_fc2.k3                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "  10. gemm      gemm_fc2.k4                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "  11. gemm      gemm_fc2.k5                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "  12. gemm      gemm_fc2.k6                      matmul+tf32x3+accumulate                343.93 MB  34.36 GFLOP\n"
        "  13. gemm      gemm_fc2.k7                      matmul+bias+tf32x3+accumulate           343.95 MB  34.36 GFLOP\n"
        "  14. pointwise mlpc_gelu_1                      gelu                                    536.87 MB\n"
        "  15. gemm      gemm_fc3.k0                      matmul+tf32x3                            90.18 MB  8.59 GFLOP\n"
        "  16. gemm      gemm_fc3.k1                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  17. gemm      gemm_fc3.k2                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  18. gemm      gemm_fc3.k3                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  19. gemm      gemm_fc3.k4                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  20. gemm      gemm_fc3.k5                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  21. gemm      gemm_fc3.k6                      matmul+tf32x3+accumulate                123.73 MB  8.59 GFLOP\n"
        "  22. gemm      gemm_fc3.k7                      matmul+bias+tf32x3+accumulate           123.74 MB  8.59 GFLOP\n");
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
    if (auto* k = std::get_if<codegen::KernelStep>(&s);
        k && k->store() == codegen::Store::Tf32x3Split) {
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
  // K = 64 and 32 are too short to cut: one chunk each, less accurate than IEEE fp32.
  CHECK(codegen::needs_tf32x3_tolerance(p));
  CHECK(p.choices.back().why ==
        "3xTF32 (--fp32-gemms tf32x3), one chunk, K = 32 (less accurate than IEEE fp32)");
  // auto never takes such a GEMM, GPU or not.
  const CompiledGraph a = compile(g, tf32_options(Fp32Gemms::Measure, 1));
  for (const codegen::Step& s : a.plan.steps)
    if (auto* gm = std::get_if<codegen::GemmStep>(&s)) CHECK_FALSE(gm->tf32x3);
  REQUIRE_FALSE(a.plan.choices.empty());
  CHECK(a.plan.choices.back().why ==
        "IEEE fp32: K = 32 cannot be cut into chunks that keep 3xTF32 as accurate (not measured)");
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
  CHECK(passes::decide_tf32x3(3000.0, 5400.0, 8192).take);
  CHECK_FALSE(passes::decide_tf32x3(99.0, 100.0, 64).take);  // within noise: IEEE kept
  CHECK_FALSE(passes::decide_tf32x3(0.0, 100.0, 64).take);
  CHECK(passes::decide_tf32x3(3000.0, 5400.0, 8192).why ==
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
      if (auto* k = std::get_if<codegen::KernelStep>(&s);
          k && k->store() == codegen::Store::Tf32x3Split) {
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
  for (const auto& [name, cubin] : c.cubins) CHECK_FALSE(cubin.empty());
}

TEST_CASE("3xTF32 in one chunk is checked with its own, wider f32 floor", "[tf32x3]") {
  const runtime::Tolerance ieee = runtime::tolerance_for(ir::DType::F32, 4096, 5);
  const runtime::Tolerance split = runtime::tolerance_for(ir::DType::F32, 4096, 5, true);
  CHECK(split.rtol == ieee.rtol);
  CHECK(split.floor > 8 * ieee.floor);
  CHECK(split.floor < 16 * ieee.floor);
  // Only f32 GEMMs are split: a bf16 graph's tolerance does not move.
  CHECK(runtime::tolerance_for(ir::DType::BF16, 4096, 5, true).floor ==
        runtime::tolerance_for(ir::DType::BF16, 4096, 5).floor);
  // mlp3's GEMMs are all cut into chunks (IEEE tolerance), odd K = 6 is not.
  const ir::Graph odd = ir::parse(R"(func @odd(%x: f32[M, 6]) -> f32[M, 5] {
  %w = param f32[5, 6]
  %y = matmul %x, %w : f32[M, 5]
  return %y
})", "odd.mlp");
  CHECK(codegen::needs_tf32x3_tolerance(compile(odd, tf32_options(Fp32Gemms::Tf32x3)).plan));
  CHECK_FALSE(codegen::needs_tf32x3_tolerance(
      compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Tf32x3)).plan));
  CHECK_FALSE(codegen::needs_tf32x3_tolerance(
      compile(make_sample("mlp3"), tf32_options(Fp32Gemms::Ieee)).plan));
}
