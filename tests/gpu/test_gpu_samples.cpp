// Every sample, in every dtype, eager and compiled, on the GPU against the fp64 reference.
// Batches: an odd one (37: scalar tails, partial blocks) and a larger one (512).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/parser.h"

using namespace mlpc;

namespace {

void check_graph(const ir::Graph& g, int64_t batch) {
  Values values = random_values(g, batch, 11);
  std::vector<int64_t> rows = sample_rows(batch);
  auto reference = reference_on_rows(g, values, rows);
  for (bool fusion : {false, true}) {
    INFO((fusion ? "compiled" : "eager") << " batch " << batch);
    CompiledGraph c = compile(g, {.fusion = fusion});
    Check check = compare_rows(g, run_on_gpu(c, values, batch), rows, reference);
    INFO("max_abs_err " << check.max_abs_err << ", tolerance ratio " << check.worst_ratio);
    CHECK(check.ok);
  }
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

TEST_CASE("every pointwise op and kernel shape matches the reference", "[gpu]") {
  // Row lengths: 1 and 7 (scalar kernels), 768 (vector kernels with a broadcast row vector).
  for (int64_t n : {1, 7, 768})
    for (const char* dt : {"f32", "f16", "bf16"}) {
      std::string t = fmt::format("{}[M, {}]", dt, n);
      std::string text = fmt::format(R"(
func @ops(%x: {0}, %z: {0}) -> ({0}, {0}) {{
  %b = param {1}[{2}]
  %a = add %x, %b : {0}
  %s = sub %a, %z : {0}
  %m = mul %s, %z : {0}
  %e = exp %z : {0}
  %d = div %m, %e : {0}
  %r = relu %d : {0}
  %g = gelu %d : {0}
  %gt = gelu_tanh %r : {0}
  %si = silu %g : {0}
  %sg = sigmoid %si : {0}
  %th = tanh %gt : {0}
  %ng = neg %th : {0}
  %sc = scale %ng, 1.5 : {0}
  %o1 = add %sc, %sg : {0}
  %c = cast %o1 : f32[M, {2}]
  %c2 = cast %c : {0}
  return %o1, %c2
}})", t, dt, n);
      INFO(text);
      ir::Graph g = ir::parse(text, "ops.mlp");
      for (int64_t batch : {1, 37, 300}) check_graph(g, batch);
    }
}
