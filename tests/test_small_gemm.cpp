// GEMMs as generated kernels (codegen/small_gemm_kernel.h, `--small-gemms`): what is taken,
// what is refused, how the plan names and counts them, and that every variant compiles with
// NVRTC for sm_90 (no GPU needed; tests/gpu/test_gpu_small_gemm.cpp checks the numbers).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "codegen/small_gemm_kernel.h"
#include "compiler/compile.h"
#include "compiler/report.h"
#include "compiler/samples.h"
#include "runtime/nvrtc_compiler.h"

using namespace mlpc;

namespace {

codegen::GemmStep gemm(ir::DType dt, int64_t n, int64_t k, codegen::Epilogue e) {
  codegen::GemmStep g;
  g.name = "gemm_y";
  g.x = 0, g.w = 1, g.y = 3;
  g.epilogue = e;
  if (e != codegen::Epilogue::None) g.bias = 2;
  g.n = n;
  g.k = k;
  g.dtype = dt;
  g.op = "matmul";
  g.ir_nodes = {"y"};
  return g;
}

bool has(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("small GEMM kernels: taken for n a multiple of 32 without a residual", "[small_gemm]") {
  using codegen::Epilogue;
  auto k = codegen::generate_small_gemm_kernel(gemm(ir::DType::BF16, 64, 32, Epilogue::Bias));
  REQUIRE(k);
  CHECK(k->name == "gemm_y");
  CHECK(k->inputs == std::vector<int>{0, 1, 2});
  CHECK(k->output == 3);
  CHECK(k->gemm_k == 32);
  CHECK(k->vec == 8);  // 16-byte loads of bf16 along K
  CHECK(k->out_row_len == codegen::kSmallGemmTile);
  CHECK(has(k->source, "v += mlpc_to_float(in2[col]);"));
  // One block per row and 32 columns: 1024 rows x 64 columns -> 2048 blocks of 256 threads.
  CHECK(codegen::launch_dims(*k, 1024 * 64).grid == 2048);
  CHECK(codegen::launch_dims(*k, 1024 * 64).block == 256);

  k = codegen::generate_small_gemm_kernel(gemm(ir::DType::F32, 256, 7, Epilogue::ReluBias));
  REQUIRE(k);
  CHECK(k->vec == 1);  // K = 7: rows of x and w are not 16-byte aligned
  CHECK(has(k->source, "v = fmaxf(v, 0.0f);"));
  k = codegen::generate_small_gemm_kernel(gemm(ir::DType::F16, 96, 64, Epilogue::None));
  REQUIRE(k);
  CHECK(k->inputs.size() == 2);
  CHECK_FALSE(has(k->source, "in2"));

  CHECK_FALSE(codegen::generate_small_gemm_kernel(gemm(ir::DType::F32, 100, 64, Epilogue::None)));
  codegen::GemmStep with_residual = gemm(ir::DType::F32, 64, 64, Epilogue::None);
  with_residual.residual = 2;
  CHECK_FALSE(codegen::generate_small_gemm_kernel(with_residual));
}

TEST_CASE("small GEMM kernels compile with NVRTC in every dtype and epilogue",
          "[small_gemm][nvrtc]") {
  using codegen::Epilogue;
  for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
    for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::ReluBias, Epilogue::GeluTanhBias})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{64, 32}, {256, 256}, {32, 7}, {3072, 768}}) {
        auto step = codegen::generate_small_gemm_kernel(gemm(dt, n, k, e));
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
  o.small_gemms = true;
  CompiledGraph c = compile(make_sample("mlp3_small"), o);
  REQUIRE(c.plan.launches() == 3);
  std::vector<StepFacts> facts = plan_facts(c.plan, 64);
  CHECK(facts[0].name == "gemm_h1");
  CHECK(facts[0].kind == "gemm");
  CHECK(facts[0].ops == std::vector<std::string>{"matmul_bias_relu"});
  CHECK(facts[0].flops == 2.0 * 64 * 256 * 256);
  CHECK(facts[2].name == "gemm_fc3");
  for (const codegen::Step& s : c.plan.steps) CHECK(std::holds_alternative<codegen::KernelStep>(s));
  // The ffn's down GEMM carries the residual through C: it stays a cuBLASLt call.
  c = compile(make_sample("ffn"), o);
  int gemm_calls = 0;
  for (const codegen::Step& s : c.plan.steps) gemm_calls += std::holds_alternative<codegen::GemmStep>(s);
  CHECK(gemm_calls == 1);
  // Off by default.
  o.small_gemms = false;
  c = compile(make_sample("mlp3_small"), o);
  for (const codegen::Step& s : c.plan.steps) CHECK(std::holds_alternative<codegen::GemmStep>(s));
}
