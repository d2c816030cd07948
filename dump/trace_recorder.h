// Records what `mlpc bench --trace` writes: one eager and one compiled forward, launched step by
// step (no CUDA graph, so each launch has its own interval) with CUDA events around each launch
// on the GPU and steady_clock around each launch call on the host (runtime/exec/step_hooks.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "compiler/compile.h"
#include "dump/trace_json.h"
#include "runtime/exec/executor.h"

namespace mlpc {

// One forward of `c` at `batch` on the values of `seed`, after two warm-up forwards (GEMMs
// chosen, modules loaded). Times are from the forward's start. Needs a GPU.
ForwardTrace record_forward(const ir::Graph& g, const CompiledGraph& c, int64_t batch,
                            uint64_t seed, const runtime::ExecutorOptions& exec,
                            const std::string& label);

// The Chrome trace of eager (-O0, heuristic GEMMs) and `compiled` at `batch` (GEMMs as `exec`
// chooses them; CUDA graphs are off while tracing).
nlohmann::json trace_bench(const ir::Graph& g, int64_t batch, uint64_t seed,
                           const CompileOptions& compiled, const runtime::ExecutorOptions& exec);

}  // namespace mlpc
