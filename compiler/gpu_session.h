// Running compiled graphs on the GPU: `mlpc run --device cuda` and `mlpc bench`, eager and
// compiled side by side, each checked against the reference on sampled rows.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler/check.h"
#include "compiler/compile.h"
#include "runtime/exec/executor.h"
#include "runtime/measure/gpu_monitor.h"

namespace mlpc {

// Throws mlpc::Error ("no NVIDIA driver or GPU found: ...") when there is none.
void require_gpu();

// Binds `batch` on `exec` and uploads every input and param of `plan` from `values`.
void bind_inputs_and_params(runtime::Executor& exec, const codegen::Plan& plan,
                            const Values& values, int64_t batch);

// One forward of `c` on the GPU with `values`; returns the outputs.
std::vector<runtime::HostTensor> run_on_gpu(const CompiledGraph& c, const Values& values,
                                            int64_t batch,
                                            const runtime::ExecutorOptions& exec = {});

struct ModeResult {
  double median_us = 0, min_us = 0;
  int launches = 0;
  bool cuda_graph = false;
  int64_t activation_bytes = 0;   // the arena: inputs, intermediates, outputs (reused when dead)
  double compile_cold_ms = 0;     // compile() with an empty cache: passes, codegen, NVRTC
  double compile_warm_ms = 0;     // compile() with every kernel in the on-disk cache
  nlohmann::json compile_cold_phases;  // the cold compile's passes_ms, plan_ms, kernels_ms, nvrtc_ms
  // The plan this batch ran (compiler/batch_plans.h): the sizes whose decisions gave it, and how
  // many distinct plans the one compile for every size made.
  std::vector<int64_t> plan_decided_at;
  int plans_compiled = 1;
  std::vector<runtime::GemmChoice> gemms;
  nlohmann::json steps;  // per launch: name, kind, GPU µs alone, bytes, GB/s (or TFLOP/s)
  runtime::GpuState gpu;  // the SM clock and power while the forwards were timed
  Check check;
  std::vector<runtime::HostTensor> outputs;  // the forward's outputs, kept for one batch size only
};

struct BenchResult {
  std::string graph, dtype, device;
  int64_t batch = 0;
  ModeResult eager, compiled;
  double speedup() const { return eager.median_us / compiled.median_us; }
};

// Where bench's inputs and params come from at a batch size (empty: seeded random values).
using ValuesFor = std::function<Values(int64_t batch)>;

// Eager: fusion off, heuristic GEMMs, no CUDA graph (one launch per op, as PyTorch eager runs).
// Compiled: `compiled` and `exec` (by default tuned GEMMs and one CUDA graph per forward).
// Each is compiled once for every batch size (compiler/batch_plans.h: -O2 decides at each size,
// the sizes deciding alike sharing a plan) and run at each on its plan, on the same values,
// checked against the reference and timed. One result per batch size.
std::vector<BenchResult> bench(const ir::Graph& g, const std::vector<int64_t>& batches,
                               uint64_t seed, const CompileOptions& compiled = {},
                               const runtime::ExecutorOptions& exec = {},
                               const ValuesFor& values_for = {});
nlohmann::json to_json(const BenchResult& r);
std::string to_text(const BenchResult& r);

}  // namespace mlpc
