// Tensor-core mma.sync GEMM kernels (codegen/mma_gemm_kernel.h), CPU side: their shapes and
// launch grids, what they refuse, how plans take them (--small-gemms mma, --gated-gemms mma, kernel
// selection's pick among the candidates), and NVRTC builds of every form. Numbers against the
// fp64 reference: tests/gpu/test_gpu_mma_gemm.cpp.
#include <catch2/catch.hpp>

#include "codegen/candidates.h"
#include "codegen/mma_gemm_kernel.h"
#include "passes/select_kernels.h"
#include "codegen/plan_builder.h"
#include "compiler/compile.h"
#include "compiler/gemm_decisions.h"
#include "dump/report.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "gemm_test_util.h"

using namespace mlpc;

namespace {

using testing::gemm_step;

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

CompileOptions mma_options(SmallGemms small, GatedGemms gated, int64_t rows = 16) {
  CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90", .build_kernels = false,
                   .decide_rows = rows, .measure_epilogues = false};
  o.small_gemms = small;
  o.gated_gemms = gated;
  return o;
}

std::vector<const codegen::KernelStep*> mma_steps(const codegen::Plan& p) {
  std::vector<const codegen::KernelStep*> out;
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s);
        k && (k->as<codegen::MmaGemm>() || k->as<codegen::GatedMmaGemm>()))
      out.push_back(k);
  return out;
}

}  // namespace

TEST_CASE("mma GEMM kernels: block shapes, launch grids and what they refuse", "[mma_gemm]") {
  using codegen::mma_gemm_shape;
  // The decode GeGLU's gate|up: K = 768 is 24 chunks, 4 to a warp; 2 MMA tiles (16 columns of
  // both weights) leave 192 blocks at 16 rows, more than one wave.
  CHECK(mma_gemm_shape(3072, 768, true).warps == 6);
  CHECK(mma_gemm_shape(3072, 768, true).n_tiles == 2);
  // Its down GEMM: K = 3072 takes the most warps; n = 768 gives 96 tiles of 8, so no widening.
  CHECK(mma_gemm_shape(768, 3072, false).warps == 8);
  CHECK(mma_gemm_shape(768, 3072, false).n_tiles == 1);
  // The article's Linear: one chunk, one warp.
  CHECK(mma_gemm_shape(64, 32, false).warps == 1);
  CHECK(mma_gemm_shape(64, 32, false).n_tiles == 1);
  // Wide plain GEMMs go to 4 tiles (32 columns) where a wave remains.
  CHECK(mma_gemm_shape(8192, 1024, false).n_tiles == 4);
  CHECK(mma_gemm_shape(14336, 4096, true).n_tiles == 2);

  auto k = codegen::generate_mma_gemm_kernel(gemm_step(ir::DType::BF16, 768, 3072, {}));
  REQUIRE(k);
  CHECK(k->name == "mma_gemm_y");
  CHECK(k->inputs == std::vector<int>{0, 1});
  CHECK(k->output == 3);
  const auto* m = k->as<codegen::MmaGemm>();
  REQUIRE(m);
  CHECK(m->k == 3072);
  CHECK(k->row_len == 768);
  CHECK(m->tile_rows == 16);
  CHECK(m->tile_cols == 8);
  CHECK(m->threads == 256);
  CHECK(k->gemm_products() == 1);
  CHECK(has(k->source, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  CHECK(has(k->source, "__shared__ float part[kWarps]"));  // several warps meet in shared memory
  // A block per 16-row tile and 8 columns: 96 at 16 rows, 192 at 17 (a partial tile), capped
  // where the rows are many (the kernel loops).
  CHECK(codegen::launch_dims(*m, *k, 16 * 768).grid == 96);
  CHECK(codegen::launch_dims(*m, *k, 16 * 768).block == 256);
  CHECK(codegen::launch_dims(*m, *k, 17 * 768).grid == 192);
  CHECK(codegen::launch_dims(*m, *k, 1 * 768).grid == 96);
  CHECK(codegen::launch_dims(*m, *k, 8192LL * 768).grid == 132 * 16);

  auto linear = codegen::generate_mma_gemm_kernel(
      gemm_step(ir::DType::F16, 64, 32, testing::Epilogue::ReluBias));
  REQUIRE(linear);
  CHECK(linear->inputs == std::vector<int>{0, 1, 2});
  CHECK(has(linear->source, ".f32.f16.f16.f32"));
  CHECK(has(linear->source, "v += mlpc_to_float(bias[col]);"));
  CHECK(has(linear->source, "v = fmaxf(v, 0.0f);"));
  CHECK_FALSE(has(linear->source, "__shared__"));  // one warp: each lane stores its fragments
  const auto& lm = std::get<codegen::MmaGemm>(linear->kind);
  CHECK(codegen::launch_dims(lm, *linear, 1024 * 64).grid == 64 * 8);
  CHECK(codegen::launch_dims(lm, *linear, 1024 * 64).block == 32);

  // Refused: f32 (no such MMA here), K not a multiple of 32, N not of 8, a residual through C.
  using testing::Epilogue;
  CHECK_FALSE(codegen::generate_mma_gemm_kernel(gemm_step(ir::DType::F32, 64, 32, Epilogue::None)));
  CHECK_FALSE(codegen::generate_mma_gemm_kernel(gemm_step(ir::DType::BF16, 64, 48, Epilogue::None)));
  CHECK_FALSE(codegen::generate_mma_gemm_kernel(gemm_step(ir::DType::BF16, 36, 64, Epilogue::None)));
  codegen::GemmStep with_residual = gemm_step(ir::DType::BF16, 64, 64, Epilogue::None);
  with_residual.residual = 2;
  with_residual.epilogue.residual = true;
  CHECK_FALSE(codegen::generate_mma_gemm_kernel(with_residual));
  CHECK_THROWS_WITH(codegen::generate_mma_gated_source("k", ir::DType::BF16, 64, 48, "", "return g;"),
                    Catch::Contains("k % 32 == 0"));
  CHECK(passes::mma_gemms_run_on("sm_80"));
  CHECK(passes::mma_gemms_run_on("sm_90a"));
  CHECK_FALSE(passes::mma_gemms_run_on("sm_75"));
}

TEST_CASE("mma GEMM kernels compile with NVRTC in every dtype and epilogue", "[mma_gemm][nvrtc]") {
  using testing::Epilogue;
  for (ir::DType dt : {ir::DType::F16, ir::DType::BF16})
    for (const ir::GemmEpilogue& e : {Epilogue::None, Epilogue::Bias, Epilogue::Relu,
                                      Epilogue::ReluBias, Epilogue::GeluTanhBias,
                                      Epilogue::SiluBias})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{64, 32}, {768, 3072}, {3072, 768}}) {
        auto step = codegen::generate_mma_gemm_kernel(gemm_step(dt, n, k, e));
        REQUIRE(step);
        INFO(step->source);
        std::vector<char> cubin = runtime::compile_to_cubin(step->source, step->name, "sm_90");
        CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
      }
  // sm_80 has the instruction too.
  auto step = codegen::generate_mma_gemm_kernel(gemm_step(ir::DType::BF16, 64, 32, Epilogue::None));
  CHECK(std::string(runtime::compile_to_cubin(step->source, step->name, "sm_80").data(), 4) ==
        "\x7f" "ELF");
}

TEST_CASE("gated GEMMs asked as mma kernels: gate, up and their combine as one mma kernel, for every GeGLU and "
          "SwiGLU sample, merged or not, built by NVRTC", "[mma_gemm][nvrtc]") {
  for (const char* name : {"geglu", "llama_geglu", "ffn", "ffn_swiglu"})
    for (MergeGemms merge : {MergeGemms::Off, MergeGemms::On}) {
      INFO(name << " merged " << (merge == MergeGemms::On));
      CompileOptions o = mma_options(SmallGemms::Off, GatedGemms::Mma);
      o.merge_gemms = merge;
      o.build_kernels = true;
      o.use_cache = false;
      CompiledGraph c = compile(make_sample(name), o);
      const auto mma = mma_steps(c.plan);
      REQUIRE(mma.size() == 1);
      const codegen::KernelStep& k = *mma[0];
      CHECK(k.as<codegen::GatedMmaGemm>());
      CHECK_FALSE(k.arch_specific());  // no TMA, no sm_90a build
      CHECK(k.gemm_products() == 2);
      CHECK(k.inputs.size() == 3);
      CHECK(k.name.rfind("mma_mlpc_fused_", 0) == 0);
      CHECK(has(k.source, "mlpc_gate_combine(g, u)"));
      CHECK(std::string(c.cubins.at(k.name).data(), 4) == "\x7f" "ELF");
      REQUIRE_FALSE(c.plan.choices.empty());
      CHECK(c.plan.choices.back().why == "gated mma kernel (--gated-gemms mma)");
    }
  // The plan as printed: one gated_gemm step of two products at the decode size.
  CompiledGraph c = compile(make_sample("geglu"), mma_options(SmallGemms::Mma, GatedGemms::Mma));
  CHECK(has(plan_text(c, 16), "plan for @geglu at batch 16: 2 launches\n"
                              "   0. gated_gemm mma_mlpc_fused_gelu_tanh_mul_0"));
  CHECK(has(plan_text(c, 16), "1. gemm      mma_gemm_down"));
  // A combine that rounds through f16 brings the headers' conversions with it.
  const char* casts = testing::kGatedThroughF16;
  CompileOptions o = mma_options(SmallGemms::Off, GatedGemms::Mma);
  o.build_kernels = true;
  o.use_cache = false;
  CompiledGraph cast = compile(ir::parse(casts, "casts.mlp"), o);
  REQUIRE(mma_steps(cast.plan).size() == 1);
  CHECK(std::string(cast.cubins.at(mma_steps(cast.plan)[0]->name).data(), 4) == "\x7f" "ELF");
}

TEST_CASE("gated candidates offer the Hopper kernel, then the mma one, and the IR's impl picks",
          "[mma_gemm][select]") {
  CompiledGraph c = compile(make_sample("geglu"), mma_options(SmallGemms::Off, GatedGemms::Off));
  std::vector<codegen::CandidateFragments> gated;
  for (codegen::CandidateFragments& cf : codegen::enumerate_candidates(c.pipeline.graph))
    if (cf.candidate.kind == passes::ChoiceKind::Gated) gated.push_back(std::move(cf));
  REQUIRE(gated.size() == 1);
  const passes::KernelCandidate& cand = gated[0].candidate;
  CHECK(cand.step == "mlpc_fused_gelu_tanh_mul_0");
  REQUIRE(cand.options.size() == 2);
  CHECK(cand.options[0].impl == ir::Impl::GatedWgmma);
  CHECK(cand.options[1].impl == ir::Impl::GatedMma);
  CHECK(std::get<codegen::KernelStep>(gated[0].options[1].steps[0]).name ==
        "mma_mlpc_fused_gelu_tanh_mul_0");
  CHECK(gated[0].baseline.steps.size() == 3);  // gate, up, the gelu*mul kernel
  // The matmuls and then the region carry the choice.
  CHECK(cand.nodes.size() == 3);
  auto lowered = [&](ir::Impl impl, bool& recorded) {
    ir::Graph g = c.pipeline.graph;
    for (ir::Node& n : g.nodes)
      if (std::find(cand.nodes.begin(), cand.nodes.end(), n.name) != cand.nodes.end())
        n.impl = impl;
    const std::vector<passes::KernelRecord> records = {
        {passes::ChoiceKind::Gated, cand.step, true, "picked"}};
    codegen::Plan p = codegen::build_plan(g, {.records = &records});
    recorded = p.choices.size() == 1 && p.choices[0].step == cand.step && p.choices[0].taken;
    return p;
  };
  bool recorded = false;
  codegen::Plan hopper = lowered(ir::Impl::GatedWgmma, recorded);
  CHECK(std::get<codegen::KernelStep>(hopper.steps[0]).as<codegen::GatedGemm>());
  codegen::Plan mma = lowered(ir::Impl::GatedMma, recorded);
  const auto& k = std::get<codegen::KernelStep>(mma.steps[0]);
  CHECK(k.as<codegen::GatedMmaGemm>());
  CHECK(mma.launches() == 2);
  // The choice is recorded under the pattern's one name, whichever kernel took it.
  CHECK(recorded);
  // Without a GPU, measuring keeps the steps apart and says so; an arch without mma.sync (and
  // without the Hopper kernel) is refused for both.
  if (runtime::gpu_unavailable_reason()) {
    CompiledGraph m = compile(make_sample("geglu"), mma_options(SmallGemms::Off, GatedGemms::Measure));
    CHECK(m.plan.choices.back().why == "kept apart: no GPU to measure on");
  }
  CompileOptions turing = mma_options(SmallGemms::Off, GatedGemms::Measure);
  turing.arch = "sm_75";
  CHECK(compile(make_sample("geglu"), turing).plan.choices.back().why ==
        "kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the target is sm_75");
  CompileOptions ampere = turing;
  ampere.arch = "sm_80";
  ampere.decide_rows = 4096;
  CHECK(compile(make_sample("geglu"), ampere).plan.choices.back().why ==
        "kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the target is sm_80, and "
        "the mma one at most 128 rows");
}

TEST_CASE("small-GEMM selection: the mma kernel is measured only up to 128 rows", "[mma_gemm]") {
  // Past both limits nothing is timed, and the record says why (no GPU needed to decide that).
  passes::KernelCandidate cand{.kind = passes::ChoiceKind::SmallGemm, .step = "gemm_y",
                               .nodes = {"y"}, .n = 768, .k = 3072, .dtype = ir::DType::BF16,
                               .options = {{.impl = ir::Impl::Mma}}};
  ir::Graph g = ir::parse(R"(func @f(%x: bf16[M, 3072]) -> bf16[M, 768] {
  %w = param bf16[768, 3072]
  %y = matmul %x, %w : bf16[M, 768]
  return %y
})");
  std::vector<passes::KernelRecord> records;
  passes::select_kernels(g, {cand}, {.small_gemms = SmallGemms::Measure, .rows = 4096,
                                     .measured = true}, &records);
  REQUIRE(records.size() == 1);
  CHECK_FALSE(records[0].taken);
  CHECK(records[0].why == "cuBLASLt: 4096 x 768 x 3072 (M x N x K) is past the 2^26 "
                          "multiply-adds a CUDA-core kernel can win and the 128 rows of the "
                          "tensor-core mma kernel (not measured)");
  CHECK(g.nodes[2].impl == ir::Impl::Cublaslt);
  // --small-gemms mma: every GEMM the kernel can compute, whatever the rows.
  CompiledGraph all = compile(make_sample("geglu"), mma_options(SmallGemms::Mma, GatedGemms::Off, 8192));
  CHECK(mma_steps(all.plan).size() == 3);
  for (const codegen::StepChoice& ch : all.plan.choices) CHECK(ch.taken);
  // f32 has no such kernel: mlp3_small keeps cuBLASLt, and says why.
  CompiledGraph f32 = compile(make_sample("mlp3_small"), mma_options(SmallGemms::Mma, GatedGemms::Off));
  CHECK(mma_steps(f32.plan).empty());
}
