// The GPU tests' common check: a graph run on the GPU at `batch`, eager (one kernel per op) and
// compiled (fused), matches the fp64 reference on the sampled rows, with the error and the
// tolerance ratio in the failure message.
#pragma once

#include <catch2/catch.hpp>

#include "codegen/tf32x3_plan.h"
#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/gpu_session.h"

namespace mlpc::testing {

// `c` (compiled from `g`) run on the GPU on `values` matches `reference` on `rows`.
inline void check_rows_on_gpu(const ir::Graph& g, const CompiledGraph& c, const Values& values,
                              int64_t batch, const std::vector<int64_t>& rows,
                              const std::vector<runtime::HostTensor>& reference) {
  Check check = compare_rows(g, run_on_gpu(c, values, batch), rows, reference,
                             codegen::needs_tf32x3_tolerance(c.plan));
  INFO("max_abs_err " << check.max_abs_err << ", tolerance ratio " << check.worst_ratio);
  CHECK(check.ok);
}

// The same on random values drawn from `seed`.
inline void check_on_gpu(const ir::Graph& g, const CompiledGraph& c, int64_t batch, uint64_t seed) {
  Values values = random_values(g, batch, seed);
  std::vector<int64_t> rows = sample_rows(batch);
  check_rows_on_gpu(g, c, values, batch, rows, reference_on_rows(g, values, rows));
}

inline void check_eager_and_compiled(const ir::Graph& g, int64_t batch, uint64_t seed) {
  Values values = random_values(g, batch, seed);
  std::vector<int64_t> rows = sample_rows(batch);
  auto reference = reference_on_rows(g, values, rows);  // once, for both
  for (bool fusion : {false, true}) {
    INFO((fusion ? "compiled" : "eager") << " batch " << batch);
    check_rows_on_gpu(g, compile(g, {.fusion = fusion}), values, batch, rows, reference);
  }
}

}  // namespace mlpc::testing
