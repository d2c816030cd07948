// GEMMs as generated kernels (--small-gemms) on the GPU against the fp64 reference: every
// epilogue the samples use, every dtype, batches that leave no tile partial and odd ones.
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "check_on_gpu.h"

using namespace mlpc;

TEST_CASE("small GEMM kernels match the reference", "[gpu][small_gemm]") {
  for (const char* sample : {"linear", "mlp3_small", "geglu", "classifier"})
    for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
      for (int64_t batch : {1, 37, 64}) {
        INFO(sample << " " << ir::dtype_name(dt) << " batch " << batch);
        const ir::Graph g = with_dtype(make_sample(sample), dt);
        CompileOptions o{.fusion = true, .epilogues = true, .measure_epilogues = false};
        o.small_gemms = SmallGemms::On;
        testing::check_on_gpu(g, compile(g, o), batch, 5);
      }
}

TEST_CASE("-O2 measures each small GEMM as a kernel and as cuBLASLt, and runs its choice",
          "[gpu][small_gemm]") {
  const ir::Graph g = make_sample("mlp3_small");
  CompileOptions o{.fusion = true, .epilogues = true, .decide_rows = 64,
                   .measure_epilogues = false};
  o.small_gemms = SmallGemms::Measure;
  CompiledGraph c = compile(g, o);
  REQUIRE(c.plan.choices.size() == 3);
  for (const codegen::StepChoice& ch : c.plan.choices) {
    INFO(ch.step << ": " << ch.why);
    CHECK(ch.why.find("measured at M=64 in a CUDA graph") != std::string::npos);
  }
  testing::check_on_gpu(g, c, 64, 9);
  // Past kSmallGemmMaxMacs nothing is timed: the decode-size GeGLU at 8192 rows.
  o.decide_rows = 8192;
  c = compile(make_sample("geglu"), o);
  for (const codegen::StepChoice& ch : c.plan.choices) {
    INFO(ch.step << ": " << ch.why);
    CHECK_FALSE(ch.taken);
    CHECK(ch.why.find("not measured") != std::string::npos);
  }
}
