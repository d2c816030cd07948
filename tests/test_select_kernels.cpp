// Kernel selection (passes/select_kernels.h): golden tests on the printed IR after the pass, the
// impl attribute's text form and its errors, and decisions from candidates' times written as the
// tuning step would (no GPU: the times are the test's).
#include <catch2/catch.hpp>

#include <algorithm>

#include "codegen/candidates.h"
#include "codegen/plan_builder.h"
#include "compiler/compile.h"
#include "compiler/samples.h"
#include "error_of.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "pass_test_util.h"
#include "passes/select_kernels.h"
#include "compiler/levels.h"
#include "runtime/device/device.h"

using mlpc::test::dedent;
using namespace mlpc;

namespace {

constexpr const char* kGeglu = R"(
func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
  %wg = param bf16[3072, 768]
  %wu = param bf16[3072, 768]
  %wd = param bf16[768, 3072]
  %g = matmul %x, %wg : bf16[M, 3072]
  %u = matmul %x, %wu : bf16[M, 3072]
  %h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0(%g, %u) : bf16[M, 3072] {
    %a = gelu_tanh %g : bf16[M, 3072]
    %m = mul %a, %u : bf16[M, 3072]
    return %m
  }
  %y = matmul %h, %wd : bf16[M, 768]
  return %y
}
)";

std::vector<passes::KernelCandidate> candidates_of(const ir::Graph& g) {
  std::vector<passes::KernelCandidate> out;
  for (const codegen::CandidateFragments& c : codegen::enumerate_candidates(g))
    out.push_back(c.candidate);
  return out;
}

// The printed IR after selection with `o` over `g`'s candidates (times as given by `time`).
template <typename Time>
std::string selected(ir::Graph& g, const passes::SelectOptions& o, Time&& time,
                     std::vector<passes::KernelRecord>* records = nullptr) {
  std::vector<passes::KernelCandidate> cands = candidates_of(g);
  for (passes::KernelCandidate& c : cands) time(c);
  passes::select_kernels(g, cands, o, records);
  ir::verify(g);
  return ir::print(g);
}

void no_times(passes::KernelCandidate&) {}

}  // namespace

TEST_CASE("select-kernels: a gated pair and its region take the Hopper kernel when asked",
          "[select]") {
  ir::Graph g = ir::parse(kGeglu, "geglu.mlp");
  std::vector<passes::KernelRecord> records;
  const std::string got = selected(
      g, {.gated_gemms = passes::GatedGemms::On, .arch = "sm_90"}, no_times, &records);
  CHECK(got == dedent(R"(
    func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {
      %wg = param bf16[3072, 768]
      %wu = param bf16[3072, 768]
      %wd = param bf16[768, 3072]
      %g = matmul %x, %wg, impl gated_wgmma : bf16[M, 3072]
      %u = matmul %x, %wu, impl gated_wgmma : bf16[M, 3072]
      %h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0(%g, %u) impl gated_wgmma : bf16[M, 3072] {
        %a = gelu_tanh %g : bf16[M, 3072]
        %m = mul %a, %u : bf16[M, 3072]
        return %m
      }
      %y = matmul %h, %wd, impl cublaslt : bf16[M, 768]
      return %y
    }
  )"));
  REQUIRE(records.size() == 1);
  CHECK(records[0].step == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(records[0].why == "gated GEMM kernel (--gated-gemms on)");
  // Codegen lowers what the IR says: one gated kernel and the down GEMM.
  const codegen::Plan p = codegen::build_plan(g, {.records = &records});
  CHECK(p.launches() == 2);
  CHECK(std::get<codegen::KernelStep>(p.steps[0]).as<codegen::GatedGemm>());
  REQUIRE(p.choices.size() == 1);
  CHECK(p.choices[0].taken);
  // The selected IR prints and parses back to itself.
  CHECK(ir::print(ir::parse(got, "selected.mlp")) == got);
}

TEST_CASE("select-kernels: measured times decide, gated first, then what it left", "[select]") {
  // At 16 rows: the mma gated kernel beats both the Hopper one and the steps apart; the down
  // GEMM's mma kernel beats cuBLASLt.
  ir::Graph g = ir::parse(kGeglu, "geglu.mlp");
  auto time = [](passes::KernelCandidate& c) {
    c.baseline_us = 20.0;
    for (passes::ImplOption& o : c.options)
      o.us = o.impl == ir::Impl::GatedMma ? 8.0 : o.impl == ir::Impl::Mma ? 5.0 : 19.9;
  };
  std::vector<passes::KernelRecord> records;
  const std::string got =
      selected(g, {.small_gemms = passes::SmallGemms::Measure,
                   .gated_gemms = passes::GatedGemms::Measure, .rows = 16, .arch = "sm_90",
                   .measured = true},
               time, &records);
  CHECK(mlpc::test::count(got, "impl gated_mma") == 3);
  CHECK(got.find("%y = matmul %h, %wd, impl mma") != std::string::npos);
  // One record for the gated pattern, one for the down GEMM: gate and up left no choice.
  REQUIRE(records.size() == 2);
  CHECK(records[0].why == "gated GEMM kernel: measured at M=16 in a CUDA graph: 8.0 us as one "
                          "gated GEMM kernel vs 20.0 us for the GEMM(s) and the gating kernel "
                          "(the mma kernel; the Hopper kernel 19.9 us)");
  CHECK(records[1].step == "gemm_y");
  CHECK(records[1].taken);
  const codegen::Plan p = codegen::build_plan(g, {.records = &records});
  CHECK(p.launches() == 2);
  CHECK(std::get<codegen::KernelStep>(p.steps[0]).as<codegen::GatedMmaGemm>());
  CHECK(std::get<codegen::KernelStep>(p.steps[1]).as<codegen::MmaGemm>());
  CHECK(p.choices.size() == 2);
}

TEST_CASE("select-kernels: f32 layouts, x before w, and 3xTF32 before either", "[select]") {
  ir::Graph g = make_sample("mlp3");
  CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90", .build_kernels = false,
                   .measure_epilogues = false};
  g = compile(g, o).pipeline.graph;
  // 3xTF32 wins for the first GEMM with a 3xTF32 candidate only; transposing x wins everywhere,
  // w nowhere (within the noise margin).
  bool first_tf32 = true;
  auto time = [&](passes::KernelCandidate& c) {
    c.baseline_us = 100.0;
    if (c.kind == passes::ChoiceKind::Tf32x3) {
      c.options[0].us = first_tf32 ? 50.0 : 150.0;
      first_tf32 = false;
    } else if (c.kind == passes::ChoiceKind::TransposedX) {
      c.options[0].us = 90.0;
    } else if (c.kind == passes::ChoiceKind::TransposedW) {
      c.baseline_us = 90.0;
      c.options[0].us = 89.5;
    }
  };
  std::vector<passes::KernelRecord> records;
  const std::string got =
      selected(g, {.fp32_gemms = passes::Fp32Gemms::Measure,
                   .transposed_x = passes::TransposedX::Measure, .rows = 8192, .measured = true},
               time, &records);
  CHECK(mlpc::test::count(got, "impl tf32x3") == 1);
  CHECK(mlpc::test::count(got, "impl cublaslt_xt ") == 2);
  CHECK(mlpc::test::count(got, "impl cublaslt_xt_wt") == 0);
  std::vector<passes::ChoiceKind> kinds;
  for (const passes::KernelRecord& r : records) kinds.push_back(r.kind);
  // Three 3xTF32 choices, then x for the two GEMMs left IEEE whose x a kernel writes, then w.
  CHECK(std::count(kinds.begin(), kinds.end(), passes::ChoiceKind::Tf32x3) == 3);
  CHECK(std::count(kinds.begin(), kinds.end(), passes::ChoiceKind::TransposedX) == 2);
  CHECK(std::count(kinds.begin(), kinds.end(), passes::ChoiceKind::TransposedW) == 2);
  const codegen::Plan p = codegen::build_plan(g, {.records = &records});
  CHECK(p.choices.size() == records.size());
  int tf32 = 0, xt = 0, wt = 0;
  for (const codegen::Step& s : p.steps)
    if (auto* gm = std::get_if<codegen::GemmStep>(&s)) {
      tf32 += gm->tf32x3 && gm->k_begin == 0;
      xt += gm->x_transposed;
      wt += gm->w_transposed;
    }
  CHECK(tf32 == 1);
  CHECK(xt == 2);
  CHECK(wt == 0);
}

TEST_CASE("select-kernels: -O2 without a GPU keeps cuBLASLt, says so, and prints the pass",
          "[select]") {
  CompileOptions o = options_for_level(2, {});
  o.arch = "sm_90";
  o.build_kernels = false;
  o.measure_epilogues = false;
  o.decide_rows = 64;
  const CompiledGraph c = compile(make_sample("mlp3_small"), o);
  // select-kernels, then fuse-mlp (which finds no chain).
  REQUIRE(c.pipeline.passes.size() >= 2);
  const passes::PassRecord& select = c.pipeline.passes[c.pipeline.passes.size() - 2];
  REQUIRE(select.pass == "select-kernels");
  CHECK(c.pipeline.passes.back().pass == "fuse-mlp");
  CHECK_FALSE(c.pipeline.passes.back().changed);
  const std::string& ir_text = select.ir;
  CHECK(mlpc::test::count(ir_text, "impl cublaslt") == 3);
  // The three layers as one kernel first, then each GEMM's kernel.
  REQUIRE(c.plan.choices.size() == 4);
  if (runtime::gpu_unavailable_reason()) {
    CHECK(c.plan.choices[0].why ==
          "layer by layer: no GPU to measure on; 3 layers, %h1 to %fc3; stops: %fc3 is a graph "
          "output");
    CHECK(c.plan.choices[1].why == "cuBLASLt: no GPU to measure on");
  }
}

TEST_CASE("impl attributes: text form and every error", "[select][parser]") {
  const std::string text = dedent(R"(
    func @f(%x: bf16[M, 64]) -> bf16[M, 64] {
      %w = param bf16[64, 64]
      %y = matmul %x, %w, act relu, impl mma : bf16[M, 64]
      return %y
    }
  )");
  CHECK(ir::print(ir::parse(text, "f.mlp")) == text);
  auto error = [](const std::string& src) { return mlpc::test::error_of([&] { ir::parse(src, "f.mlp"); }); };
  CHECK(error("func @f(%x: bf16[M, 64]) -> bf16[M, 64] {\n  %w = param bf16[64, 64]\n"
              "  %y = matmul %x, %w, impl warp : bf16[M, 64]\n  return %y\n}\n") ==
        "f.mlp:3:28: error: unknown implementation 'warp' (expected cublaslt, cublaslt_xt, "
        "cublaslt_xt_wt, tf32x3, simt, mma, gated_wgmma, gated_mma or fused_mlp)");
  CHECK(error("func @f(%x: bf16[M, 64]) -> bf16[M, 64] {\n  %w = param bf16[64, 64]\n"
              "  %y = matmul %x, %w, impl simt, impl mma : bf16[M, 64]\n  return %y\n}\n") ==
        "f.mlp:3:34: error: matmul has 'impl' twice");
  CHECK(error("func @f(%x: f32[M, 64]) -> f32[M, 64] {\n  %w = param f32[64, 64]\n"
              "  %y = matmul %x, %w, impl mma : f32[M, 64]\n  return %y\n}\n") ==
        "f.mlp:3:3: error: node %y (matmul): impl mma does not run f32 GEMMs");
  CHECK(error("func @f(%x: f32[M, 64]) -> f32[M, 64] {\n"
              "  %y = fused.pointwise @k(%x) impl simt : f32[M, 64] {\n"
              "    %r = relu %x : f32[M, 64]\n    return %r\n  }\n  return %y\n}\n") ==
        "f.mlp:2:3: error: node %y (fused.pointwise): a fused.pointwise region's impl is "
        "gated_wgmma or gated_mma, not simt");
  // An impl codegen cannot lower names the node: n = 12 is no multiple of the mma tile's 8.
  const ir::Graph bad = ir::parse("func @f(%x: bf16[M, 64]) -> bf16[M, 12] {\n"
                                  "  %w = param bf16[12, 64]\n"
                                  "  %y = matmul %x, %w, impl mma : bf16[M, 12]\n  return %y\n}\n",
                                  "f.mlp");
  CHECK(mlpc::test::error_of([&] { codegen::build_plan(bad); })
            .rfind("node %y: impl mma cannot be lowered here", 0) == 0);
}
