// GEMMs as generated kernels (codegen/small_gemm_kernel.h, `--small-gemms`): what is taken,
// what is refused, how the plan names and counts them, and that every variant compiles with
// NVRTC for sm_90 (no GPU needed; tests/gpu/test_gpu_small_gemm.cpp checks the numbers).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "codegen/candidates.h"
#include "codegen/plan_builder.h"
#include "ir/printer.h"
#include "passes/select_kernels.h"
#include "ir/parser.h"
#include "codegen/mma_gemm_kernel.h"
#include "codegen/small_gemm_kernel.h"
#include "compiler/compile.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "gemm_test_util.h"

using namespace mlpc;

namespace {

using testing::gemm_step;

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("small GEMM kernels: taken for n a multiple of 32 without a residual", "[small_gemm]") {
  using testing::Epilogue;
  auto k = codegen::generate_small_gemm_kernel(gemm_step(ir::DType::BF16, 64, 32, Epilogue::Bias));
  REQUIRE(k);
  CHECK(k->name == "gemm_y");
  CHECK(k->inputs == std::vector<int>{0, 1, 2});
  CHECK(k->output == 3);
  const auto* simt = k->as<codegen::SimtGemm>();
  REQUIRE(simt);
  CHECK(simt->k == 32);
  CHECK(k->vec == 8);  // 16-byte loads of bf16 along K
  // K = 32 bf16 is 4 chunks of 8: 4 threads per output (none idle), so a block of 256 threads
  // covers 64 columns: one block per row of the 1024 x 64 output.
  CHECK(simt->tile_cols == 64);
  CHECK(has(k->source, "constexpr int kParts = 4;"));
  // The bias is read before the K loop (beside x and w), not after the sums.
  const size_t bias_read = k->source.find("const float b = mlpc_to_float(in2[col]);");
  REQUIRE(bias_read != std::string::npos);
  CHECK(bias_read < k->source.find("for (int c = part * kVec"));
  CHECK(has(k->source, "v += b;"));
  CHECK(codegen::launch_dims(*simt, *k, 1024 * 64).grid == 1024);
  CHECK(codegen::launch_dims(*simt, *k, 1024 * 64).block == 256);
  // Enough chunks along K (256 f32 = 64 chunks of 4): 8 threads per output, 32 columns a block.
  k = codegen::generate_small_gemm_kernel(gemm_step(ir::DType::F32, 256, 256, Epilogue::Bias));
  REQUIRE(k);
  CHECK(k->as<codegen::SimtGemm>()->tile_cols == codegen::kSmallGemmMinTile);
  CHECK(has(k->source, "constexpr int kParts = 8;"));
  // Few chunks, but 64 columns do not divide n = 96: stays at 8 threads per output, 32 columns.
  k = codegen::generate_small_gemm_kernel(gemm_step(ir::DType::BF16, 96, 16, Epilogue::None));
  REQUIRE(k);
  CHECK(k->as<codegen::SimtGemm>()->tile_cols == 32);

  k = codegen::generate_small_gemm_kernel(gemm_step(ir::DType::F32, 256, 7, Epilogue::ReluBias));
  REQUIRE(k);
  CHECK(k->vec == 1);  // K = 7: rows of x and w are not 16-byte aligned
  CHECK(has(k->source, "v = fmaxf(v, 0.0f);"));
  k = codegen::generate_small_gemm_kernel(gemm_step(ir::DType::F16, 96, 64, Epilogue::None));
  REQUIRE(k);
  CHECK(k->inputs.size() == 2);
  CHECK_FALSE(has(k->source, "in2"));

  CHECK_FALSE(codegen::generate_small_gemm_kernel(gemm_step(ir::DType::F32, 100, 64, Epilogue::None)));
  codegen::GemmStep with_residual = gemm_step(ir::DType::F32, 64, 64, Epilogue::None);
  with_residual.residual = 2;
  with_residual.epilogue.residual = true;
  CHECK_FALSE(codegen::generate_small_gemm_kernel(with_residual));
}

TEST_CASE("small GEMM kernels compile with NVRTC in every dtype and epilogue",
          "[small_gemm][nvrtc]") {
  using testing::Epilogue;
  for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
    for (const ir::GemmEpilogue& e : {Epilogue::None, Epilogue::Bias, Epilogue::Relu,
                                      Epilogue::ReluBias, Epilogue::GeluTanhBias,
                                      Epilogue::SiluBias})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{64, 32}, {256, 256}, {32, 7}, {3072, 768}}) {
        auto step = codegen::generate_small_gemm_kernel(gemm_step(dt, n, k, e));
        REQUIRE(step);
        INFO(step->source);
        std::vector<char> cubin = runtime::compile_to_cubin(step->source, step->name, "sm_90");
        CHECK(std::string(cubin.data(), 4) == "\x7f" "ELF");
      }
}

TEST_CASE("plans with --small-gemms: each GEMM one generated kernel, named as the GEMM",
          "[small_gemm]") {
  CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90", .build_kernels = false,
                   .measure_epilogues = false};
  o.small_gemms = SmallGemms::On;
  CompiledGraph c = compile(make_sample("mlp3_small"), o);
  REQUIRE(c.plan.launches() == 3);
  std::vector<StepFacts> facts = plan_facts(c.plan, 64);
  CHECK(facts[0].name == "gemm_h1");
  CHECK(facts[0].kind == "gemm");
  CHECK(facts[0].ops == std::vector<std::string>{"matmul", "bias", "relu"});
  CHECK(facts[0].flops == 2.0 * 64 * 256 * 256);
  CHECK(facts[2].name == "gemm_fc3");
  for (const codegen::Step& s : c.plan.steps) CHECK(std::holds_alternative<codegen::KernelStep>(s));
  // The ffn's down GEMM carries the residual through C: it stays a cuBLASLt call.
  c = compile(make_sample("ffn"), o);
  int gemm_calls = 0;
  for (const codegen::Step& s : c.plan.steps) gemm_calls += std::holds_alternative<codegen::GemmStep>(s);
  CHECK(gemm_calls == 1);
  // Off by default.
  o.small_gemms = SmallGemms::Off;
  c = compile(make_sample("mlp3_small"), o);
  for (const codegen::Step& s : c.plan.steps) CHECK(std::holds_alternative<codegen::GemmStep>(s));
}

TEST_CASE("small-GEMM candidates are data: selection picks by their times and the plan obeys",
          "[small_gemm][select]") {
  CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90", .build_kernels = false,
                   .measure_epilogues = false};
  CompiledGraph c = compile(make_sample("ffn"), o);
  std::vector<passes::KernelCandidate> small;
  for (const codegen::CandidateFragments& cf : codegen::enumerate_candidates(c.pipeline.graph)) {
    if (cf.candidate.kind != passes::ChoiceKind::SmallGemm) continue;
    small.push_back(cf.candidate);
    if (cf.candidate.options.empty()) continue;
    // The CUDA-core kernel, then the tensor-core one (bf16, k % 32 == 0, n % 8 == 0), each its
    // own fragment; the baseline is the cuBLASLt step.
    REQUIRE(cf.options.size() == 2);
    const auto& simt = std::get<codegen::KernelStep>(cf.options[0].steps.at(0));
    const auto& mma = std::get<codegen::KernelStep>(cf.options[1].steps.at(0));
    CHECK(simt.name == cf.candidate.step);
    CHECK(mma.name == "mma_" + cf.candidate.step);
    CHECK(mma.as<codegen::MmaGemm>()->tile_rows == codegen::kMmaTileRows);
    CHECK(std::holds_alternative<codegen::GemmStep>(cf.baseline.steps.at(0)));
  }
  // ffn at -O2: the gate and up GEMMs have kernels; the down GEMM carries the residual through
  // C, which the kernels cannot, so it has none, and says why.
  REQUIRE(small.size() == 3);
  CHECK(small[0].step == "gemm_gate");
  CHECK(small[1].step == "gemm_up");
  CHECK(small[2].step == "gemm_y");
  CHECK(small[2].options.empty());
  // Times as the tuning step would write them: gate's CUDA-core kernel wins, up's kernels lose.
  small[0].baseline_us = 10.0;
  small[0].options[0].us = 3.0;
  small[0].options[1].us = 5.0;
  small[1].baseline_us = 10.0;
  small[1].options[0].us = 12.0;
  small[1].options[1].us = 9.8;  // within the noise margin
  passes::SelectOptions so{.small_gemms = SmallGemms::Measure, .rows = 16, .arch = "sm_90",
                           .measured = true};
  ir::Graph g = c.pipeline.graph;
  std::vector<passes::KernelRecord> records;
  CHECK(passes::select_kernels(g, small, so, &records));
  const std::string ir_text = ir::print(g);
  CHECK(ir_text.find("%gate = matmul %norm, %gate.weight, impl simt") != std::string::npos);
  CHECK(ir_text.find("%up = matmul %norm, %up.weight, impl cublaslt") != std::string::npos);
  codegen::Plan p = codegen::build_plan(g, {.records = &records});
  REQUIRE(p.choices.size() == 3);
  CHECK(p.choices[0].step == "gemm_gate");
  CHECK(p.choices[0].taken);
  CHECK(p.choices[0].why == "generated kernel: measured at M=16 in a CUDA graph: 3.00 us as a "
                            "kernel vs 10.00 us for cuBLASLt (the CUDA-core kernel; tensor-core "
                            "mma kernel 5.00 us)");
  CHECK_FALSE(p.choices[1].taken);
  CHECK(p.choices[2].step == "gemm_y");
  CHECK_FALSE(p.choices[2].taken);
  CHECK(p.choices[2].why ==
        "cuBLASLt: the generated GEMM kernels take no residual (x.W^T + residual)");
  int kernels_named_gemm = 0;
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s))
      kernels_named_gemm += k->gemm_products() > 0;
  CHECK(kernels_named_gemm == 1);
  // Without times the same candidates keep cuBLASLt, saying so.
  so.measured = false;
  g = c.pipeline.graph;
  records.clear();
  passes::select_kernels(g, small, so, &records);
  REQUIRE(records.size() == 3);
  CHECK(records[0].why == "cuBLASLt: no GPU to measure on");
  // Past what a kernel can win, nothing is timed: the rule says so.
  so.rows = 1 << 20;
  CHECK(passes::options_to_time(small[0], so).empty());
}

TEST_CASE("the small-GEMM rule: the kernel only when measurably faster than cuBLASLt",
          "[small_gemm]") {
  passes::Choice c = passes::decide_small_gemm(3.8, 11.6, 64);
  CHECK(c.take);
  CHECK(c.why == "generated kernel: measured at M=64 in a CUDA graph: 3.80 us as a kernel vs "
                 "11.60 us for cuBLASLt");
  CHECK_FALSE(passes::decide_small_gemm(3.2, 3.3, 1024).take);  // within the 5% of noise
  CHECK_FALSE(passes::decide_small_gemm(20.2, 7.4, 16).take);
  CHECK_FALSE(passes::decide_small_gemm(0.0, 7.4, 16).take);  // not timed: cuBLASLt kept
}

TEST_CASE("a small-GEMM kernel's symbol is a unique C identifier, whatever the value is called",
          "[small_gemm][nvrtc]") {
  // At -O1 nothing folds into mlp3_small's GEMMs: their values are fc1.mm, fc2.mm, fc3.mm. The
  // compute-sanitizer run on the GPU found `gemm_fc1.mm` handed to NVRTC as a function name.
  CompileOptions o{.fusion = true, .arch = "sm_90"};
  o.small_gemms = SmallGemms::On;
  o.use_cache = false;
  CompiledGraph c = compile(make_sample("mlp3_small"), o);
  REQUIRE(std::holds_alternative<codegen::KernelStep>(c.plan.steps[0]));
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[0]).name == "gemm_fc1_mm");
  CHECK(c.cubins.count("gemm_fc1_mm") == 1);
  // Two values that map to one identifier get two symbols.
  ir::Graph g = ir::parse(
      "func @two(%x: f32[M, 32]) -> f32[M, 32] {\n"
      "  %w = param f32[32, 32]\n"
      "  %a.b = matmul %x, %w : f32[M, 32]\n"
      "  %a_b = matmul %a.b, %w : f32[M, 32]\n"
      "  return %a_b\n}\n");
  c = compile(g, o);
  REQUIRE(c.plan.launches() == 2);
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[0]).name == "gemm_a_b");
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[1]).name == "gemm_a_b_2");
  CHECK(c.cubins.size() == 2);
  // Nor may it take a hand-written region's symbol.
  g = ir::parse(
      "func @taken(%x: f32[M, 32]) -> f32[M, 32] {\n"
      "  %w = param f32[32, 32]\n"
      "  %y = matmul %x, %w : f32[M, 32]\n"
      "  %r = fused.pointwise @gemm_y(%y) : f32[M, 32] {\n"
      "    %s = relu %y : f32[M, 32]\n    return %s\n  }\n"
      "  return %r\n}\n");
  o.fusion = false;  // keep the region as written
  c = compile(g, o);
  REQUIRE(c.plan.launches() == 2);
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[0]).name == "gemm_y_2");
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[1]).name == "gemm_y");
}
