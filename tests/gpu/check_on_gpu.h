// The GPU tests' common check: a graph run on the GPU at `batch`, eager (one kernel per op) and
// compiled (fused), matches the fp64 reference on the sampled rows, with the error and the
// tolerance ratio in the failure message.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

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
                             codegen::needs_tf32x3_tolerance(c.plan), &values);
  INFO("max_abs_err " << check.max_abs_err << ", tolerance ratio " << check.worst_ratio
                      << ", contribution ratio " << check.contribution_worst_ratio);
  CHECK(check.ok);
}

// The same on random values drawn from `seed`.
inline void check_on_gpu(const ir::Graph& g, const CompiledGraph& c, int64_t batch, uint64_t seed) {
  Values values = random_values(g, batch, seed);
  std::vector<int64_t> rows = sample_rows(batch);
  check_rows_on_gpu(g, c, values, batch, rows, reference_on_rows(g, values, rows));
}

// `c` bound at `batch` and run twice (the second run replays its captured CUDA graph), then the
// params `weights` set to new values and run again: the outputs match the reference on the new
// values, so params derived from them (TF32 parts, transposes) follow. Returns the executor
// and the values it holds, for more checks.
struct Rebound {
  std::unique_ptr<runtime::Executor> ex;
  Values values;
};
inline Rebound check_new_weights_reach_graph(const ir::Graph& g, const CompiledGraph& c,
                                             int64_t batch,
                                             const std::vector<std::string>& weights) {
  Rebound r{std::make_unique<runtime::Executor>(c.plan, c.cubins), random_values(g, batch, 1)};
  bind_inputs_and_params(*r.ex, c.plan, r.values, batch);
  r.ex->run();
  r.ex->run();
  REQUIRE(r.ex->uses_cuda_graph());
  const Values other = random_values(g, batch, 2);
  for (const std::string& w : weights) {
    r.values[w] = other.at(w);
    r.ex->set_tensor(w, r.values[w]);
  }
  r.ex->run();
  const std::vector<int64_t> rows = sample_rows(batch);
  const Check check = compare_rows(g, r.ex->outputs(), rows, reference_on_rows(g, r.values, rows),
                                   codegen::needs_tf32x3_tolerance(c.plan), &r.values);
  INFO("max_abs_err " << check.max_abs_err);
  CHECK(check.ok);
  return r;
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
