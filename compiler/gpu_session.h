// Running compiled graphs on the GPU: `mlpc run --device cuda` and `mlpc bench`, eager and
// compiled side by side, each checked against the reference on sampled rows.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/check.h"
#include "compiler/compile.h"

namespace mlpc {

// Throws mlpc::Error ("no usable CUDA GPU: ...") when there is none.
void require_gpu();

// One forward of `c` on the GPU with `values`; returns the outputs.
std::vector<runtime::HostTensor> run_on_gpu(const CompiledGraph& c, const Values& values,
                                            int64_t batch);

struct ModeResult {
  double median_us = 0, min_us = 0;
  int launches = 0;
  int64_t activation_bytes = 0;  // inputs, intermediates and outputs on the device
  double compile_ms = 0;
  Check check;
};

struct BenchResult {
  std::string graph, dtype, device;
  int64_t batch = 0;
  ModeResult eager, compiled;
  double speedup() const { return eager.median_us / compiled.median_us; }
};

// Compiles `g` twice (eager and `compiled`), runs both on the same seeded values, checks them
// against the reference and times them.
// `compiled` says how the compiled side is built (eager is always fusion off).
BenchResult bench(const ir::Graph& g, int64_t batch, uint64_t seed,
                  const CompileOptions& compiled = {});
nlohmann::json to_json(const BenchResult& r);
std::string to_text(const BenchResult& r);

}  // namespace mlpc
