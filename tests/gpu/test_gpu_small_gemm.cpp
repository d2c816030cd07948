// GEMMs as generated kernels (--small-gemms) on the GPU against the fp64 reference: every
// epilogue the samples use, every dtype, batches that leave no tile partial and odd ones.
#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"
#include "compiler/retype.h"
#include "compiler/samples.h"

using namespace mlpc;

TEST_CASE("small GEMM kernels match the reference", "[gpu][small_gemm]") {
  for (const char* sample : {"linear", "mlp3_small", "geglu", "classifier"})
    for (ir::DType dt : {ir::DType::F32, ir::DType::F16, ir::DType::BF16})
      for (int64_t batch : {1, 37, 64}) {
        INFO(sample << " " << ir::dtype_name(dt) << " batch " << batch);
        const ir::Graph g = with_dtype(make_sample(sample), dt);
        CompileOptions o{.fusion = true, .epilogues = true, .measure_epilogues = false};
        o.small_gemms = true;
        CompiledGraph c = compile(g, o);
        Values values = random_values(g, batch, 5);
        std::vector<int64_t> rows = sample_rows(batch);
        Check check = compare_rows(g, run_on_gpu(c, values, batch), rows,
                                   reference_on_rows(g, values, rows));
        INFO("max_abs_err " << check.max_abs_err << ", tolerance ratio " << check.worst_ratio);
        CHECK(check.ok);
      }
}
