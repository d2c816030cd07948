// Every sample, in every dtype, eager and compiled, on the GPU against the fp64 reference.
// Batches: an odd one (37: scalar tails, partial blocks) and a larger one (512).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "check_on_gpu.h"
#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "runtime/exec/executor.h"
#include "ir/parser.h"

using namespace mlpc;

namespace {

void check_graph(const ir::Graph& g, int64_t batch) {
  testing::check_eager_and_compiled(g, batch, 11);
}

}  // namespace

TEST_CASE("samples match the reference in every dtype, eager and compiled", "[gpu]") {
  for (const SampleInfo& s : samples())
    for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
      for (int64_t batch : {37, 512}) {
        INFO(s.name << " " << ir::dtype_name(dt));
        check_graph(with_dtype(make_sample(s.name), dt), batch);
      }
}

TEST_CASE("every pointwise op, at every kernel shape, matches the reference", "[gpu]") {
  // Each output is one op applied to the inputs, so each is held to its dtype's single-op
  // tolerance. Row lengths 1 and 7 give scalar kernels (the bias cannot be read as a vector);
  // 768 gives vector kernels with a broadcast bias; batch 37 leaves partial vectors and blocks.
  for (int64_t n : {1, 7, 768})
    for (const char* dt : {"f32", "f16", "bf16"}) {
      std::string text = fmt::format(R"(
func @ops(%x: {0}[M, {1}], %z: {0}[M, {1}]) -> ({0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, {1}]) {{
  %b = param {0}[{1}]
  %a = add %x, %b : {0}[M, {1}]
  %s = sub %x, %z : {0}[M, {1}]
  %m = mul %x, %z : {0}[M, {1}]
  %e = exp %z : {0}[M, {1}]
  %d = div %x, %e : {0}[M, {1}]
  %r = relu %x : {0}[M, {1}]
  %g = gelu %x : {0}[M, {1}]
  %gt = gelu_tanh %x : {0}[M, {1}]
  %si = silu %x : {0}[M, {1}]
  %sg = sigmoid %x : {0}[M, {1}]
  %th = tanh %x : {0}[M, {1}]
  %ng = neg %x : {0}[M, {1}]
  %sc = scale %x, 1.5 : {0}[M, {1}]
  %c = cast %x : f32[M, {1}]
  %c2 = cast %c : {0}[M, {1}]
  return %a, %s, %m, %e, %d, %r, %g, %gt, %si, %sg, %th, %ng, %sc, %c2, %x
}})", dt, n);
      INFO(text);
      ir::Graph g = ir::parse(text, "ops.mlp");
      for (int64_t batch : {1, 37, 300}) check_graph(g, batch);
    }
}

TEST_CASE("a fused chain with a broadcast bias matches the reference", "[gpu]") {
  for (const char* dt : {"f32", "f16", "bf16"}) {
    std::string text = fmt::format(R"(
func @chain(%x: {0}[M, 3072], %u: {0}[M, 3072]) -> {0}[M, 3072] {{
  %b = param {0}[3072]
  %y = add %x, %b : {0}[M, 3072]
  %a = gelu_tanh %y : {0}[M, 3072]
  %h = mul %a, %u : {0}[M, 3072]
  %s = scale %h, 0.5 : {0}[M, 3072]
  %o = silu %s : {0}[M, 3072]
  return %o
}})", dt);
    INFO(text);
    check_graph(ir::parse(text, "chain.mlp"), 257);
  }
}

TEST_CASE("plans at -O2 (epilogues) and CUDA-graph replays match the reference", "[gpu]") {
  for (const SampleInfo& s : samples()) {
    INFO(s.name);
    ir::Graph g = make_sample(s.name);
    const int64_t batch = 300;
    Values values = random_values(g, batch, 5);
    std::vector<int64_t> rows = sample_rows(batch);
    auto reference = reference_on_rows(g, values, rows);
    CompiledGraph c = compile(g, {.epilogues = true});
    runtime::Executor exec(c.plan, c.cubins, {.tune_gemms = true, .cuda_graph = true});
    exec.bind_batch(batch);
    for (const auto& [name, t] : values) exec.set_tensor(name, t);
    for (int i = 0; i < 3; ++i) exec.run();  // eager pass with tuning, then graph replays
    CHECK(exec.uses_cuda_graph());
    Check check = compare_rows(g, exec.outputs(), rows, reference, false, &values);
    INFO("max_abs_err " << check.max_abs_err << ", tolerance ratio " << check.worst_ratio
                        << ", contribution ratio " << check.contribution_worst_ratio);
    CHECK(check.ok);
  }
}
