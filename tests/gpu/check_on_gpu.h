// The GPU tests' common check: a graph run on the GPU at `batch`, eager (one kernel per op) and
// compiled (fused), matches the fp64 reference on the sampled rows, with the error and the
// tolerance ratio in the failure message.
#pragma once

#include <catch2/catch.hpp>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"

namespace mlpc::testing {

inline void check_eager_and_compiled(const ir::Graph& g, int64_t batch, uint64_t seed) {
  Values values = random_values(g, batch, seed);
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

}  // namespace mlpc::testing
