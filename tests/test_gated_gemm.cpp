// Gated GEMMs (codegen/gated_gemm_kernel.h, gated_gemm_plan.h, `--gated-gemms`): the kernel
// compiles with NVRTC for sm_90a in both 16-bit dtypes and every ring depth that fits; which
// plans take it, what they look like, and what is refused (no GPU needed; the numbers are checked
// on the GPU by tests/gpu/test_gpu_gated_gemm.cpp and bench/gated_gemm_probe).
#include <catch2/catch.hpp>

#include <algorithm>

#include "passes/kernel_rules.h"
#include <fmt/format.h>

#include <set>

#include "codegen/cuda_ops.h"
#include "codegen/gated_gemm_kernel.h"
#include "compiler/compile.h"
#include "dump/report.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "compiler/speculative_builds.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_builds.h"
#include "runtime/jit/nvrtc_compiler.h"

#include "gemm_test_util.h"

using namespace mlpc;
using mlpc::CompileOptions;

TEST_CASE("gated GEMM kernels compile with NVRTC for sm_90a", "[gated_gemm][nvrtc]") {
  for (ir::DType dt : {ir::DType::BF16, ir::DType::F16}) {
    // with epilogue workers the hand-over tile takes a fourth ring stage's room
    for (codegen::GatedGemmConfig config : {codegen::GatedGemmConfig{2, true}, codegen::GatedGemmConfig{3, true},
                                            codegen::GatedGemmConfig{3, false}, codegen::GatedGemmConfig{4, false},
                                            codegen::GatedGemmConfig{3, true, false},
                                            codegen::GatedGemmConfig{3, true, true, 2},
                                            codegen::GatedGemmConfig{3, false, false, 2}}) {
      const std::string name = fmt::format("mlpc_gated_{}_{}_{}{}_c{}", ir::dtype_name(dt), config.stages,
                                           config.epilogue_workers ? "workers" : "consumers",
                                           config.split_tail ? "" : "_nosplit", config.cluster_m);
      const std::string src = codegen::generate_gated_gemm_source(
          name, dt, std::string(codegen::cuda_helper(ir::Op::Silu)), "return mlpc_silu(g) * u;", config);
      INFO(src);
      CHECK(src.find("m64n256k16.f32." + std::string(dt == ir::DType::BF16 ? "bf16.bf16" : "f16.f16")) !=
            std::string::npos);
      CHECK(src.find("constexpr bool kSplitTail = " + std::string(config.split_tail ? "true" : "false")) !=
            std::string::npos);
      // clusters of 2: the launch takes whole clusters, and the weights are multicast
      CHECK((src.find("__cluster_dims__(2, 1, 1)") != std::string::npos) == (config.cluster_m == 2));
      CHECK(src.find("constexpr int kCluster = " + std::to_string(config.cluster_m) + ";") != std::string::npos);
      CHECK_FALSE(runtime::compile_to_cubin(src, name, "sm_90a").empty());
    }
  }
}

TEST_CASE("gated GEMM kernels: fp32 operands and rings that do not fit are refused", "[gated_gemm]") {
  CHECK_THROWS_WITH(codegen::generate_gated_gemm_source("k", ir::DType::F32, "", "return g * u;"),
                    Catch::Contains("f32 operands"));
  CHECK_THROWS_WITH(codegen::generate_gated_gemm_source("k", ir::DType::BF16, "", "return g * u;",
                                                        codegen::GatedGemmConfig{5, false}),
                    Catch::Contains("5 stages do not fit"));
  CHECK_THROWS_WITH(codegen::generate_gated_gemm_source("k", ir::DType::BF16, "", "return g * u;",
                                                        codegen::GatedGemmConfig{4, true}),
                    Catch::Contains("4 stages do not fit"));
  // Persistent grid: a block per SM at most, fewer when there are fewer tiles.
  // Fewer tiles than SMs: each counts as up to max_splits k-ranges.
  CHECK(codegen::gated_gemm_grid(8192, 3072, 2, 132) == 132);
  CHECK(codegen::gated_gemm_grid(16, 3072, 2, 132) == 48);  // 24 tiles in 2 k-ranges
  CHECK(codegen::gated_gemm_grid(16, 3072, 1, 132) == 24);  // no split
  CHECK(codegen::gated_gemm_grid(129, 200, 1, 132) == 4);
  CHECK(codegen::gated_gemm_grid(1, 8, 5, 132) == 5);
  // Whole clusters of 2: a cluster takes two row blocks of the same columns, so 3 row blocks
  // take 2 clusters; at most the clusters resident at once (132 blocks: 66).
  CHECK(codegen::gated_gemm_grid(8192, 3072, 1, 132, 2) == 132);
  CHECK(codegen::gated_gemm_grid(300, 200, 1, 132, 2) == 8);   // 2 x 2 cluster tiles
  CHECK(codegen::gated_gemm_grid(16, 3072, 2, 132, 2) == 96);  // 24 cluster tiles in 2 k-ranges
  CHECK(codegen::gated_gemm_grid(8192, 3072, 1, 131, 2) == 130);
  CHECK_THROWS_WITH(codegen::generate_gated_gemm_source("k", ir::DType::BF16, "", "return g * u;",
                                                        codegen::GatedGemmConfig{3, true, true, 4}),
                    Catch::Contains("clusters of 4 blocks (1 or 2)"));
  // splits * splits * 4 <= k-slices: the partial sums' traffic stays below the work saved
  CHECK(codegen::gated_gemm_max_splits(64) == 1);
  CHECK(codegen::gated_gemm_max_splits(15 * 64) == 1);
  CHECK(codegen::gated_gemm_max_splits(16 * 64) == 2);
  CHECK(codegen::gated_gemm_max_splits(768) == 1);  // the article's: no split
  CHECK(codegen::gated_gemm_max_splits(2048) == 2);
  CHECK(codegen::gated_gemm_max_splits(4096) == 4);  // Llama-8B's
  CHECK(codegen::gated_gemm_max_splits(14336) == 7);
  CHECK(codegen::gated_gemm_smem_bytes(codegen::GatedGemmConfig{4, false}) == 4 * 48 * 1024 + 32 * 1024 + 1024);  // ring, results, alignment
  CHECK(codegen::gated_gemm_smem_bytes(codegen::GatedGemmConfig{3, true}) == 3 * 48 * 1024 + 64 * 1024 + 1024);  // g and u handed over
}

namespace {

CompileOptions gated_options(GatedGemms mode, const std::string& arch = "sm_90") {
  CompileOptions o{.fusion = true, .epilogues = true, .arch = arch, .build_kernels = false,
                   .measure_epilogues = false};
  o.gated_gemms = mode;
  return o;
}

const codegen::KernelStep* gated_step(const codegen::Plan& p) {
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s); k && k->as<codegen::GatedGemm>()) return k;
  return nullptr;
}

std::vector<std::string> buffer_names(const codegen::Plan& p, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int i : ids) out.push_back(p.buffers[static_cast<size_t>(i)].name);
  return out;
}

bool has_buffer(const codegen::Plan& p, const std::string& name) {
  for (const codegen::Buffer& b : p.buffers)
    if (b.name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("gated GEMMs: geglu's gate, up and gelu*mul become one kernel, the rest stays",
          "[gated_gemm]") {
  CompiledGraph c = compile(make_sample("geglu"), gated_options(GatedGemms::On));
  CHECK(plan_text(c, 8192).find(
            "plan for @geglu at batch 8192: 2 launches\n"
            "   0. gated_gemm mlpc_fused_gelu_tanh_mul_0       matmul+matmul+gelu_tanh+mul              "
            "72.35 MB  77.31 GFLOP\n"
            "   1. gemm      gemm_down                        matmul                                   "
            "67.63 MB  38.65 GFLOP\n") != std::string::npos);
  const codegen::KernelStep* k = gated_step(c.plan);
  REQUIRE(k);
  CHECK(buffer_names(c.plan, k->inputs) == std::vector<std::string>{"x", "gate.weight", "up.weight"});
  CHECK(c.plan.buffers[static_cast<size_t>(k->output)].name == "h");
  CHECK(k->row_len == 3072);
  CHECK(k->as<codegen::GatedGemm>()->k == 768);
  CHECK(k->ir_nodes == std::vector<std::string>{"gate", "up", "act", "h"});
  // gate and up never reach memory: their buffers leave the plan.
  CHECK_FALSE(has_buffer(c.plan, "gate"));
  CHECK_FALSE(has_buffer(c.plan, "up"));
  CHECK(k->source.find("const float v_gate = g;\n  const float v_up = u;") != std::string::npos);
  // the fast gelu_tanh: x * sigmoid(2z) on the special-function unit
  CHECK(k->source.find("ex2.approx.ftz.f32") != std::string::npos);
  CHECK(k->source.find("rcp.approx.ftz.f32") != std::string::npos);
  CHECK(k->source.find("tanhf") == std::string::npos);
  REQUIRE(c.plan.choices.size() == 1);
  CHECK(c.plan.choices.back().step == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(c.plan.choices.back().taken);
  // Every other step's buffers are renumbered consistently.
  const auto& down = std::get<codegen::GemmStep>(c.plan.steps[1]);
  CHECK(c.plan.buffers[static_cast<size_t>(down.x)].name == "h");
  CHECK(c.plan.buffers[static_cast<size_t>(down.y)].name == "down");
  CHECK(buffer_names(c.plan, c.plan.outputs) == std::vector<std::string>{"down"});
}

TEST_CASE("gated GEMM kernels: the split-tail code is built only for a K that splits", "[gated_gemm]") {
  // The article's K = 768 never splits: its kernel leaves the partial sums out (a shorter NVRTC
  // build, the longest path of a cold compile). Llama's K = 4096 splits in up to 4.
  for (auto [sample, splits] : {std::pair{"geglu", false}, std::pair{"llama_geglu", true}}) {
    INFO(sample);
    CompiledGraph c = compile(make_sample(sample), gated_options(GatedGemms::On));
    const codegen::KernelStep* k = gated_step(c.plan);
    REQUIRE(k);
    CHECK((codegen::gated_gemm_max_splits(k->product_k()) > 1) == splits);
    CHECK(k->source.find(std::string("constexpr bool kSplitTail = ") + (splits ? "true" : "false")) !=
          std::string::npos);
  }
}

TEST_CASE("gated GEMMs: merged gate|up is read back as its two weight halves", "[gated_gemm]") {
  CompileOptions o = gated_options(GatedGemms::On);
  o.merge_gemms = MergeGemms::On;
  CompiledGraph c = compile(make_sample("geglu"), o);
  const codegen::KernelStep* k = gated_step(c.plan);
  REQUIRE(k);
  CHECK(c.plan.launches() == 2);
  CHECK(buffer_names(c.plan, k->inputs) == std::vector<std::string>{"x", "gate.weight", "up.weight"});
  CHECK(c.plan.buffers[static_cast<size_t>(k->inputs[1])].view_offset == 0);
  CHECK(c.plan.buffers[static_cast<size_t>(k->inputs[2])].view_offset == 3072 * 768 * 2);
  // The stacked weight stays (it owns the halves' memory); its product does not.
  CHECK(has_buffer(c.plan, "gate_up.weight"));
  CHECK_FALSE(has_buffer(c.plan, "gate_up"));
  const int whole = c.plan.buffers[static_cast<size_t>(k->inputs[1])].view_of;
  REQUIRE(whole >= 0);
  CHECK(c.plan.buffers[static_cast<size_t>(whole)].name == "gate_up.weight");
  CHECK(k->source.find("const float v_gate = g;\n  const float v_up = u;") != std::string::npos);
  CHECK(k->ir_nodes == std::vector<std::string>{"gate_up", "gate", "up", "act", "h"});
  // The kernel of gate and up apart, to the byte: a cold -O2 compile builds both merge outcomes'
  // plans ahead of the merge decision, and one NVRTC build (same cache key) serves the two.
  o.merge_gemms = MergeGemms::Off;
  CompiledGraph apart = compile(make_sample("geglu"), o);
  const codegen::KernelStep* k_apart = gated_step(apart.plan);
  REQUIRE(k_apart);
  CHECK(k->name == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(k_apart->name == k->name);
  CHECK(k_apart->source == k->source);
  CHECK(runtime::kernel_build_key(*k_apart, "sm_90") == runtime::kernel_build_key(*k, "sm_90"));
  CHECK(k->source.find("#include") == std::string::npos);  // no header to parse (cvt packs the pair)
}

TEST_CASE("gated GEMMs: every GeGLU and SwiGLU sample, built by NVRTC for sm_90a", "[gated_gemm][nvrtc]") {
  for (const char* name : {"geglu", "llama_geglu", "ffn", "ffn_swiglu"}) {
    INFO(name);
    CompileOptions o = gated_options(GatedGemms::On);
    o.build_kernels = true;
    o.use_cache = false;
    CompiledGraph c = compile(make_sample(name), o);
    const codegen::KernelStep* k = gated_step(c.plan);
    REQUIRE(k);
    CHECK(std::string(c.cubins.at(k->name).data(), 4) == "\x7f" "ELF");
  }
  // A combine that rounds through f16 needs the headers' conversions: they come back with it.
  const char* casts = testing::kGatedThroughF16;
  CompileOptions o = gated_options(GatedGemms::On);
  o.build_kernels = true;
  o.use_cache = false;
  CompiledGraph cast = compile(ir::parse(casts, "casts.mlp"), o);
  const codegen::KernelStep* k = gated_step(cast.plan);
  REQUIRE(k);
  CHECK(k->source.find("#include <cuda_fp16.h>") != std::string::npos);
  CHECK(k->source.find("__float2half_rn(") != std::string::npos);
  CHECK(std::string(cast.cubins.at(k->name).data(), 4) == "\x7f" "ELF");
  CompiledGraph swiglu = compile(make_sample("ffn_swiglu"), gated_options(GatedGemms::On));
  CHECK(gated_step(swiglu.plan)->source.find("\"f\"(-1.4426950409f * x)") != std::string::npos);
}

TEST_CASE("gated GEMMs: what is not taken, and why", "[gated_gemm]") {
  // Off (-O1's default): no pattern is even looked for.
  CompiledGraph off = compile(make_sample("geglu"), gated_options(GatedGemms::Off));
  CHECK_FALSE(gated_step(off.plan));
  CHECK(off.plan.launches() == 4);
  // Another arch: refused, with the reason recorded.
  CompiledGraph ampere = compile(make_sample("geglu"), gated_options(GatedGemms::On, "sm_80"));
  CHECK_FALSE(gated_step(ampere.plan));
  CHECK(ampere.plan.choices.back().why.find("needs sm_90") != std::string::npos);
  // fp32 has no WGMMA form; mlp3's GEMMs have no gating kernel at all.
  CHECK_FALSE(gated_step(compile(with_dtype(make_sample("geglu"), ir::DType::F32),
                                 gated_options(GatedGemms::On)).plan));
  CHECK_FALSE(gated_step(compile(make_sample("mlp3"), gated_options(GatedGemms::On)).plan));
  // A product read by anything else must reach memory.
  const char* shared_gate = R"(func @g(%x: bf16[M, 64]) -> (bf16[M, 64], bf16[M, 64]) {
  %wg = param bf16[64, 64]
  %wu = param bf16[64, 64]
  %gate = matmul %x, %wg : bf16[M, 64]
  %up = matmul %x, %wu : bf16[M, 64]
  %act = silu %gate : bf16[M, 64]
  %h = mul %act, %up : bf16[M, 64]
  return %h, %gate
})";
  CHECK_FALSE(gated_step(compile(ir::parse(shared_gate, "shared.mlp"), gated_options(GatedGemms::On)).plan));
  // Two GEMMs of different inputs are not a gated GEMM.
  const char* two_inputs = R"(func @g(%x: bf16[M, 64], %z: bf16[M, 64]) -> bf16[M, 64] {
  %wg = param bf16[64, 64]
  %wu = param bf16[64, 64]
  %gate = matmul %x, %wg : bf16[M, 64]
  %up = matmul %z, %wu : bf16[M, 64]
  %h = mul %gate, %up : bf16[M, 64]
  return %h
})";
  CHECK_FALSE(gated_step(compile(ir::parse(two_inputs, "two.mlp"), gated_options(GatedGemms::On)).plan));
  // Measuring without a GPU keeps the steps apart and says so (this machine may have one).
  if (runtime::gpu_unavailable_reason()) {
    CompiledGraph m = compile(make_sample("geglu"), gated_options(GatedGemms::Measure));
    CHECK_FALSE(gated_step(m.plan));
    CHECK(m.plan.choices.back().why == "kept apart: no GPU to measure on");
  }
}

TEST_CASE("the gated-GEMM rule: the kernel only when measurably faster", "[gated_gemm]") {
  CHECK(passes::decide_gated_gemm(122.0, 144.0, 8192).take);
  CHECK_FALSE(passes::decide_gated_gemm(143.0, 144.0, 8192).take);  // within noise
  CHECK_FALSE(passes::decide_gated_gemm(1370.0, 1290.0, 4096).take);
  CHECK_FALSE(passes::decide_gated_gemm(0.0, 144.0, 8192).take);
  CHECK(passes::decide_gated_gemm(122.0, 144.0, 8192).why ==
        "gated GEMM kernel: measured at M=8192 in a CUDA graph: 122.0 us as one gated GEMM kernel "
        "vs 144.0 us for the GEMM(s) and the gating kernel");
}

namespace {

// Every kernel of `plan` (name and source) is among `kernels`.
bool kernels_among(const codegen::Plan& plan, const std::vector<codegen::KernelStep>& kernels) {
  std::set<std::pair<std::string, std::string>> have;
  for (const codegen::KernelStep& k : kernels) have.insert({k.name, k.source});
  for (const codegen::Step& s : plan.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s); k && !have.count({k->name, k->source})) {
      UNSCOPED_INFO("not built ahead: " << k->name);
      return false;
    }
  return true;
}

}  // namespace

TEST_CASE("kernels built ahead are those -O2's tuning step can time", "[gated_gemm]") {
  const ir::Graph g = make_sample("geglu");
  CompileOptions measured = gated_options(GatedGemms::Measure);
  measured.merge_gemms = MergeGemms::Measure;
  const std::vector<codegen::KernelStep> ahead = speculative_kernels(g, measured, "sm_90");
  // The region's kernel and the gated kernel that takes its name, apart and merged: built one by
  // one (as one plan, the two of one name would be refused and nothing built ahead).
  CHECK(std::count_if(ahead.begin(), ahead.end(), [](const codegen::KernelStep& k) {
          return k.name == "mlpc_fused_gelu_tanh_mul_0";
        }) >= 2);
  // Whatever the measurements decide, the plan's kernels (and the alternatives' the gated
  // decision times) were built ahead.
  for (MergeGemms merge : {MergeGemms::On, MergeGemms::Off})
    for (GatedGemms gated : {GatedGemms::On, GatedGemms::Off}) {
      CompileOptions fixed = gated_options(gated);
      fixed.merge_gemms = merge;
      INFO("merge " << (merge == MergeGemms::On) << ", gated " << (gated == GatedGemms::On));
      CHECK(kernels_among(compile(g, fixed).plan, ahead));
    }
  // Nothing to build ahead where nothing generated is timed: no Measure mode, no fusion, or a
  // gated decision on a GPU without the kernel's instructions.
  CHECK(speculative_kernels(g, gated_options(GatedGemms::On), "sm_90").empty());
  CompileOptions eager = measured;
  eager.fusion = false;
  CHECK(speculative_kernels(g, eager, "sm_90").empty());
  CHECK(speculative_kernels(g, gated_options(GatedGemms::Measure), "sm_80").empty());
  CHECK_FALSE(speculative_kernels(g, gated_options(GatedGemms::Measure), "sm_90").empty());
}
