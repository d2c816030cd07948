// Checking a GPU result against the fp64 reference. The reference runs on a sample of rows (every
// op maps row r to row r), so checking the article's sizes takes a moment, not minutes.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "host/host_tensor.h"
#include "runtime/reference/tolerance.h"

namespace mlpc {

using Values = std::map<std::string, runtime::HostTensor>;  // inputs and params by name

// Seeded inputs (at `batch`) and params for every source of `g`.
Values random_values(const ir::Graph& g, int64_t batch, uint64_t seed);

// The fp64 reference holds every value of the graph on the host: refuse (mlpc::Error) a batch
// whose values would take more than `limit_bytes`, instead of being killed for memory.
void check_reference_fits(const ir::Graph& g, int64_t batch,
                          int64_t limit_bytes = int64_t{8} << 30);

// Up to `max_rows` rows spread over the batch, first and last included.
std::vector<int64_t> sample_rows(int64_t batch, int64_t max_rows = 64);

struct Check {
  std::vector<int64_t> rows;  // the rows compared
  double max_abs_err = 0.0;
  double worst_ratio = 0.0;  // <= 1: within tolerance
  // The output's own part judged on its own scale: for a residual output (y = x + f(x), x an
  // input) y - x (runtime::compare_contribution; needs the values), for a softmax output the
  // centred log-probabilities (runtime::compare_log_softmax). 0 when no output is either.
  double contribution_worst_ratio = 0.0;
  bool ok = true;
};

// The reference on `rows` of `values`' inputs; outputs of the reference, no comparison.
std::vector<runtime::HostTensor> reference_on_rows(const ir::Graph& g, const Values& values,
                                                   const std::vector<int64_t>& rows);
// Compares `got` (full-batch outputs) on `rows` with `reference`, with the graph's tolerance;
// `tf32x3`: the plan that computed `got` has a 3xTF32 GEMM less accurate than IEEE fp32
// (codegen/tf32x3_plan.h: needs_tf32x3_tolerance).
// With `values` (the inputs the outputs were computed from), a residual output is also judged
// on y - x.
Check compare_rows(const ir::Graph& g, const std::vector<runtime::HostTensor>& got,
                   const std::vector<int64_t>& rows,
                   const std::vector<runtime::HostTensor>& reference, bool tf32x3 = false,
                   const Values* values = nullptr);

// The input output `i` of `g` adds its contribution to (`%y = add %x, %f` with %x an input of
// y's type), or nullptr.
const ir::Node* residual_base(const ir::Graph& g, size_t output);

// The tolerance for `g`'s outputs: its dtype and its longest GEMM reduction.
runtime::Tolerance graph_tolerance(const ir::Graph& g, ir::DType dtype, bool tf32x3 = false);

}  // namespace mlpc
