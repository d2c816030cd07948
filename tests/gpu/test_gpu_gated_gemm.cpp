// Gated GEMM kernels (--gated-gemms, codegen/gated_gemm_kernel.h) on the GPU against the fp64
// reference: GeGLU and SwiGLU samples, gate and up apart or merged, both 16-bit dtypes, batches
// that fill no tile, fill one partly, and span many; a shape whose K and n leave ragged tiles; a
// deep K whose tiles are split along k into 4 ranges (the last round's, and all of them at
// batches under one round).
//
// Split tiles (codegen::gated_gemm_max_splits): deep's K = 4096 in up to 4 k-ranges: at batch 1
// its 2 tiles in 4, at 300 its 6 in 4, at 1000 its 16 in 4. The other samples' K do not split.
// Epilogue workers: blocks with more than one tile (geglu and ffn at batch 1000) hand all but
// their last over.
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "check_on_gpu.h"

using namespace mlpc;

namespace {

bool hopper() { return runtime::device_arch() == "sm_90"; }

bool has_gated(const codegen::Plan& p) {
  for (const codegen::Step& s : p.steps)
    if (auto* k = std::get_if<codegen::KernelStep>(&s); k && k->as<codegen::GatedGemm>())
      return true;
  return false;
}

// `g` compiled with the gated GEMM kernel asked for (--gated-gemms on), epilogues not measured.
CompiledGraph compile_gated(const ir::Graph& g, MergeGemms merge) {
  CompileOptions o{.fusion = true, .epilogues = true, .merge_gemms = merge,
                   .measure_epilogues = false};
  o.gated_gemms = GatedGemms::On;
  CompiledGraph c = compile(g, o);
  REQUIRE(has_gated(c.plan));
  return c;
}

// K = 40 (one partial k-slice), n = 200 (a full and a partial column tile).
constexpr const char* kRagged = R"(func @ragged(%x: bf16[M, 40]) -> bf16[M, 40] {
  %wg = param bf16[200, 40]
  %wu = param bf16[200, 40]
  %gate = matmul %x, %wg : bf16[M, 200]
  %up = matmul %x, %wu : bf16[M, 200]
  %act = silu %gate : bf16[M, 200]
  %h = mul %act, %up : bf16[M, 200]
  %wd = param bf16[40, 200]
  %y = matmul %h, %wd : bf16[M, 40]
  return %y
})";

// K = 4096 (64 k-slices: up to 4 k-ranges per tile), n = 256 (two column tiles).
constexpr const char* kDeep = R"(func @deep(%x: bf16[M, 4096]) -> bf16[M, 64] {
  %wg = param bf16[256, 4096]
  %wu = param bf16[256, 4096]
  %gate = matmul %x, %wg : bf16[M, 256]
  %up = matmul %x, %wu : bf16[M, 256]
  %act = gelu_tanh %gate : bf16[M, 256]
  %h = mul %act, %up : bf16[M, 256]
  %wd = param bf16[64, 256]
  %y = matmul %h, %wd : bf16[M, 64]
  return %y
})";

}  // namespace

TEST_CASE("gated GEMM kernels match the reference", "[gpu][gated_gemm]") {
  if (!hopper()) {
    WARN("skipped: gated GEMM kernels need sm_90, this GPU is " + runtime::device_arch());
    return;
  }
  for (const char* sample : {"geglu", "ffn", "ffn_swiglu", "ragged", "deep"})
    for (ir::DType dt : {ir::DType::BF16, ir::DType::F16})
      for (MergeGemms merge : {MergeGemms::Off, MergeGemms::On})
        for (int64_t batch : {1, 37, 300, 1000}) {
          INFO(sample << " " << ir::dtype_name(dt) << (merge == MergeGemms::On ? " merged" : "")
                      << " batch " << batch);
          const std::string name = sample;
          const ir::Graph base = name == "ragged" ? ir::parse(kRagged, "ragged.mlp")
                                 : name == "deep" ? ir::parse(kDeep, "deep.mlp")
                                                  : make_sample(sample);
          const ir::Graph g = with_dtype(base, dt);
          testing::check_on_gpu(g, compile_gated(g, merge), batch, 11);
        }
}

TEST_CASE("-O2 times the gated GEMM against the steps it replaces, and runs its choice",
          "[gpu][gated_gemm]") {
  if (!hopper()) {
    WARN("skipped: gated GEMM kernels need sm_90, this GPU is " + runtime::device_arch());
    return;
  }
  const ir::Graph g = make_sample("geglu");
  CompileOptions o{.fusion = true, .epilogues = true, .merge_gemms = MergeGemms::Measure,
                   .decide_rows = 8192};
  o.gated_gemms = GatedGemms::Measure;
  CompiledGraph c = compile(g, o);
  REQUIRE_FALSE(c.plan.choices.empty());
  const codegen::StepChoice& ch = c.plan.choices.back();
  INFO(ch.step << ": " << ch.why);
  CHECK(ch.why.find("measured at M=8192 in a CUDA graph") != std::string::npos);
  CHECK(ch.taken == has_gated(c.plan));
  testing::check_on_gpu(g, c, 512, 3);
}

TEST_CASE("split tail tiles: one executor repeats its results bit for bit and leaves its counters "
          "ready for the next launch",
          "[gpu][gated_gemm]") {
  if (!hopper()) {
    WARN("skipped: gated GEMM kernels need sm_90, this GPU is " + runtime::device_arch());
    return;
  }
  // deep at batch 300: 6 tiles of 4 k-ranges each. If a launch left a tile's counter non-zero,
  // the next launch would find no last split for it and leave y's old values in place: the run
  // on other inputs would then fail its reference check. Sums taken in split order, whoever
  // finishes last, make the third run repeat the first exactly.
  const ir::Graph g = ir::parse(kDeep, "deep.mlp");
  const CompiledGraph c = compile_gated(g, MergeGemms::Off);
  constexpr int64_t kBatch = 300;
  runtime::Executor ex(c.plan, c.cubins);
  const Values a = random_values(g, kBatch, 5);
  Values b = a;  // the same weights, another x
  b["x"] = random_values(g, kBatch, 6).at("x");
  bind_inputs_and_params(ex, c.plan, a, kBatch);
  ex.run();
  const std::vector<runtime::HostTensor> first = ex.outputs();
  ex.set_tensor("x", b.at("x"));
  ex.run();  // replays the CUDA graph captured now
  const std::vector<int64_t> rows = sample_rows(kBatch);
  const Check check = compare_rows(g, ex.outputs(), rows, reference_on_rows(g, b, rows), false);
  INFO("max_abs_err " << check.max_abs_err);
  CHECK(check.ok);
  ex.set_tensor("x", a.at("x"));
  ex.run();
  const std::vector<runtime::HostTensor> again = ex.outputs();
  REQUIRE(again.size() == first.size());
  for (size_t i = 0; i < first.size(); ++i) CHECK(again[i].data == first[i].data);
}
