// Row kernels on the GPU against the fp64 reference: rmsnorm, layernorm, softmax and lone
// reductions at row lengths 1, 7, 768, 4096 and 14336 (scalar and vector loads, a warp per row,
// a block per row), in every dtype, eager (every primitive its own kernel) and compiled.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "check_on_gpu.h"
#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "ir/parser.h"

using namespace mlpc;

namespace {

void check_graph(const ir::Graph& g, int64_t batch) {
  testing::check_eager_and_compiled(g, batch, 23);
}

}  // namespace

TEST_CASE("row kernels match the reference at every row length and dtype", "[gpu][reduction]") {
  for (int64_t n : {1, 7, 768, 4096, 14336})
    for (const char* dt : {"f32", "f16", "bf16"}) {
      // A residual add as prologue, each composite, and reductions returned per row. The sum
      // is over x + 0.5: a sum of zero-mean values cancels to a value far smaller than its
      // rounding error scale (sqrt(n) ulps of the terms), which no relative bound can judge.
      std::string text = fmt::format(R"(
func @rows(%x: {0}[M, {1}], %r: {0}[M, {1}]) -> ({0}[M, {1}], {0}[M, {1}], {0}[M, {1}], {0}[M, 1], {0}[M, 1]) {{
  %w = param {0}[{1}]
  %b = param {0}[{1}]
  %h = add %x, %r : {0}[M, {1}]
  %rms = rmsnorm %h, %w, 1e-05 : {0}[M, {1}]
  %ln = layernorm %x, %w, %b, 1e-05 : {0}[M, {1}]
  %sm = softmax %x : {0}[M, {1}]
  %mx = reduce_max %r : {0}[M, 1]
  %xs = add_scalar %x, 0.5 : {0}[M, {1}]
  %s = reduce_sum %xs : {0}[M, 1]
  return %rms, %ln, %sm, %mx, %s
}})", dt, n);
      INFO(text);
      ir::Graph g = ir::parse(text, "rows.mlp");
      for (int64_t batch : {1, 37}) check_graph(g, batch);
    }
}

TEST_CASE("a long-row softmax that does not fit in registers re-reads its row",
          "[gpu][reduction]") {
  // f32 rows of 40000: 1024 threads x 10 vectors of 4, more than a thread keeps in registers.
  ir::Graph g = ir::parse(R"(
func @wide(%x: f32[M, 40000]) -> f32[M, 40000] {
  %p = softmax %x : f32[M, 40000]
  return %p
})", "wide.mlp");
  check_graph(g, 5);
}
