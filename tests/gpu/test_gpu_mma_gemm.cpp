// Tensor-core mma.sync GEMM kernels (codegen/mma_gemm_kernel.h) on the GPU against the fp64
// reference: plain (every epilogue the samples use) and gated (GeGLU, SwiGLU; gate and up apart
// or merged), bf16 and f16, at batches that fill 16-row tiles, leave one partial (1, 17, 100)
// and loop over the grid (4096: more tiles than the launch cap).
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gemm_decisions.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "runtime/device/device.h"
#include "check_on_gpu.h"

using namespace mlpc;

namespace {

size_t mma_kernels(const codegen::Plan& p) {
  size_t n = 0;
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s);
        k && (k->as<codegen::MmaGemm>() || k->as<codegen::GatedMmaGemm>()))
      ++n;
  return n;
}

}  // namespace

TEST_CASE("mma GEMM kernels match the reference", "[gpu][mma_gemm]") {
  if (!passes::mma_gemms_run_on(runtime::device_arch())) {
    WARN("skipped: mma GEMM kernels need sm_80, this GPU is " + runtime::device_arch());
    return;
  }
  for (const char* sample : {"linear", "geglu", "ffn_swiglu", "classifier"})
    for (ir::DType dt : {ir::DType::BF16, ir::DType::F16})
      for (MergeGemms merge : {MergeGemms::Off, MergeGemms::On})
        for (int64_t batch : {1, 16, 17, 100, 4096}) {
          INFO(sample << " " << ir::dtype_name(dt) << " merged " << (merge == MergeGemms::On)
                      << " batch " << batch);
          const ir::Graph g = with_dtype(make_sample(sample), dt);
          CompileOptions o{.fusion = true, .epilogues = true, .measure_epilogues = false};
          o.small_gemms = SmallGemms::Mma;
          o.gated_gemms = GatedGemms::Mma;
          o.merge_gemms = merge;
          const CompiledGraph c = compile(g, o);
          CHECK(mma_kernels(c.plan) > 0);
          testing::check_on_gpu(g, c, batch, 13);
        }
}

TEST_CASE("-O2 at the decode size times the mma kernels beside the others, and runs its choice",
          "[gpu][mma_gemm]") {
  CompileOptions o{.fusion = true, .epilogues = true, .decide_rows = 16};
  o.merge_gemms = MergeGemms::Measure;
  o.small_gemms = SmallGemms::Measure;
  o.gated_gemms = GatedGemms::Measure;
  const ir::Graph g = make_sample("geglu");
  const CompiledGraph c = compile(g, o);
  bool gated_timed = false;
  for (const codegen::StepChoice& ch : c.plan.choices) {
    INFO(ch.step << ": " << ch.why);
    if (ch.step.find("gelu_tanh_mul") != std::string::npos && passes::mma_gemms_run_on(runtime::device_arch()))
      gated_timed |= ch.why.find("mma kernel") != std::string::npos;
    UNSCOPED_INFO(ch.step << ": " << ch.why);
  }
  if (passes::mma_gemms_run_on(runtime::device_arch())) CHECK(gated_timed);
  testing::check_on_gpu(g, c, 16, 21);
}
