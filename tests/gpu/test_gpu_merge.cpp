// Merged sibling GEMMs on the GPU: the stacked weight (params uploaded into their places in the
// concat's allocation), the merged GEMM and the kernel reading both halves through slices, against
// the fp64 reference of the unmerged graph, in every dtype, with and without CUDA graphs.
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/parser.h"

using namespace mlpc;

TEST_CASE("a merged gate|up GEMM computes the unmerged graph", "[gpu][merge]") {
  for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
    for (int64_t batch : {37, 512}) {
      ir::Graph g = with_dtype(make_sample("geglu"), dt);
      INFO(ir::dtype_name(dt) << " batch " << batch);
      Values values = random_values(g, batch, 13);
      std::vector<int64_t> rows = sample_rows(batch);
      auto reference = reference_on_rows(g, values, rows);
      CompileOptions o{.fusion = true, .epilogues = true};
      o.merge_gemms = MergeGemms::On;
      CompiledGraph c = compile(g, o);
      REQUIRE(c.plan.launches() == 3);
      for (bool graph : {false, true}) {
        Check check = compare_rows(g, run_on_gpu(c, values, batch, {.cuda_graph = graph}), rows,
                                   reference);
        INFO("cuda graph " << graph << " max_abs_err " << check.max_abs_err);
        CHECK(check.ok);
      }
    }
}

TEST_CASE("a slice with an unaligned offset runs as a scalar kernel", "[gpu][merge]") {
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 10]) -> (f32[M, 3], f32[M, 7]) {
  %a = slice %x, 1 : f32[M, 3]
  %r = relu %a : f32[M, 3]
  %b = slice %x, 3 : f32[M, 7]
  return %r, %b
})", "t.mlp");
  for (int64_t batch : {1, 37}) {
    Values values = random_values(g, batch, 3);
    std::vector<int64_t> rows = sample_rows(batch);
    Check check = compare_rows(g, run_on_gpu(compile(g, {}), values, batch), rows,
                               reference_on_rows(g, values, rows));
    CHECK(check.ok);
  }
}
