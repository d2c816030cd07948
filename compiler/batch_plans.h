// One compile for several batch sizes, each run on the plan decided for it.
//
// -O2's measured decisions (merged GEMMs, epilogues, generated GEMM kernels, 3xTF32, layouts) are
// timed at a batch size, and what wins at 16 rows (the tensor-core mma kernels, which re-read
// every weight per 16 rows) loses at 8192 (cuBLASLt's large tiles). So each size asked for gets
// its own decisions, and the sizes whose plans come out the same share one plan. Every kernel of
// every plan is built here: running at any batch afterwards never runs NVRTC.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace mlpc {

struct BatchPlan {
  std::vector<int64_t> decided_at;  // the sizes asked for that gave this plan, ascending
  CompiledGraph compiled;           // compiled with decide_rows = decided_at.front()
};

struct BatchPlans {
  std::vector<BatchPlan> plans;  // ascending by decided_at; never empty after compile_for_batches
  // The plan a forward at `batch` rows runs: the one decided at the smallest size asked for that
  // is at least `batch`, or past the largest size asked for, the largest's.
  size_t index_for(int64_t batch) const;
  const BatchPlan& for_batch(int64_t batch) const { return plans.at(index_for(batch)); }
};

// Whether `options` make decisions whose outcome depends on the rows they are measured at (any
// measured -O2 decision). Without them one plan serves every batch.
bool decisions_depend_on_rows(const CompileOptions& options);

// What makes two compiled plans the same plan: their steps, buffers and kernel sources (the
// measured reasons for the choices aside, whose times differ by batch).
std::string plan_signature(const CompiledGraph& c);

using CompileFn = std::function<CompiledGraph(const ir::Graph&, const CompileOptions&)>;
// compile() itself, named apart from the library API's compile overloads (mlpc/mlpc.h).
inline CompiledGraph compile_graph(const ir::Graph& g, const CompileOptions& o) {
  return compile(g, o);
}

// Compiles `g` for every size in `batches` (any order, repeats ignored; at least one, each > 0):
// with decisions that depend on rows, once per size with decide_rows set to it, keeping one plan
// per distinct signature; otherwise once, at the largest size. `compile_one` is compile() unless
// a test stands in for it.
BatchPlans compile_for_batches(const ir::Graph& g, const CompileOptions& options,
                               std::vector<int64_t> batches,
                               const CompileFn& compile_one = compile_graph);

// "decided at 16 rows", "decided at 1, 16 rows": for reports.
std::string describe_decided_at(const std::vector<int64_t>& decided_at);

}  // namespace mlpc
