// GEMMs reading x stored transposed (codegen/transposed_x_plan.h, `--transposed-x`) on the GPU:
// outputs match the fp64 reference at batch sizes that are not whole 32-row tiles, from one
// compile; new weights reach the transposed weights a captured graph reads; -O2's measured
// decision times both layouts and records the numbers.
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/samples.h"
#include "ir/parser.h"
#include "../transposed_x_graphs.h"
#include "check_on_gpu.h"

using namespace mlpc;

namespace {

CompiledGraph compiled(const ir::Graph& g, TransposedX mode, int opt, int64_t decide_rows = 0) {
  CompileOptions o{.fusion = true, .epilogues = opt >= 2, .measure_epilogues = false};
  o.transposed_x = mode;
  o.decide_rows = decide_rows;
  return compile(g, o);
}

int transposed_gemms(const codegen::Plan& p) {
  int n = 0;
  for (const codegen::Step& s : p.steps)
    if (auto* g = std::get_if<codegen::GemmStep>(&s); g && g->x_transposed) ++n;
  return n;
}

}  // namespace

TEST_CASE("transposed x: outputs match the reference at every batch size, from one compile",
          "[gpu][transposed_x]") {
  const ir::Graph tx = ir::parse(testing::kTransposedX, "tx.mlp");
  for (int opt : {1, 2}) {
    const CompiledGraph c = compiled(tx, TransposedX::On, opt);
    REQUIRE(transposed_gemms(c.plan) == 2);
    for (int64_t batch : {1, 37, 100, 300}) {
      INFO("tx -O" << opt << " batch " << batch);
      testing::check_on_gpu(tx, c, batch, 3);
    }
  }
  const ir::Graph mlp3 = make_sample("mlp3");
  const CompiledGraph c = compiled(mlp3, TransposedX::On, 2);
  REQUIRE(transposed_gemms(c.plan) == 2);
  for (int64_t batch : {1, 300}) {
    INFO("mlp3 batch " << batch);
    testing::check_on_gpu(mlp3, c, batch, 4);
  }
}

TEST_CASE("transposed x: new weights reach the transposed weights, which are not set directly",
          "[gpu][transposed_x]") {
  const ir::Graph g = ir::parse(testing::kTransposedX, "tx.mlp");
  const CompiledGraph c = compiled(g, TransposedX::On, 2);
  auto [ex, values] = testing::check_new_weights_reach_graph(g, c, 40, {"w2", "w3"});
  CHECK_THROWS_WITH(ex->set_tensor("w2.T", values.at("w2")),
                    Catch::Contains("holds the transpose of w2: set w2 instead"));
}

TEST_CASE("transposed x: -O2 measures both layouts and records the times",
          "[gpu][transposed_x]") {
  const ir::Graph g = make_sample("mlp3");
  const CompiledGraph c = compiled(g, TransposedX::Measure, 2, 512);
  int x_asked = 0, x_taken = 0, w_asked = 0;
  for (const codegen::StepChoice& ch : c.plan.choices) {
    const bool x = ch.why.find("row-major (x's kernel and the GEMM)") != std::string::npos;
    const bool w = ch.why.find("with x alone (x's kernel and the GEMM)") != std::string::npos;
    if (!x && !w) continue;
    x_asked += x;
    x_taken += x && ch.taken;
    w_asked += w;
    INFO(ch.step << ": " << ch.why);
    CHECK(ch.why.find("measured at M=512 in a CUDA graph") != std::string::npos);
  }
  CHECK(x_asked == 2);  // fc2 and fc3
  CHECK(w_asked == x_taken);  // the weight is asked about once x is transposed
  testing::check_on_gpu(g, c, 512, 5);
}
