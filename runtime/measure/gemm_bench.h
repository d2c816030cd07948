// Times a GEMM shape on its own, on scratch buffers holding random values (zeros draw less power
// and run faster, so they would flatter every GEMM: bench/gemm_probe.cpp), with cuBLASLt's
// candidates tuned and the choice cached on disk like any other GEMM (runtime/gemm/gemm_tuner.h):
// the measurement behind compile-time decisions such as merging sibling GEMMs. Needs a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/plan.h"

namespace mlpc::runtime {

class GemmBench {
 public:
  GemmBench();  // throws mlpc::Error without a GPU
  ~GemmBench();
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  // Median µs of one launch of y[rows, n] = act(x[rows, k] . w[n, k]^T + bias) with the best of
  // cuBLASLt's candidates (taken from the tuning cache when it holds the shape; else tuned within
  // runtime/gemm/tuning_budget.h's budget). The epilogue has no residual, and cuBLASLt runs it
  // (passes/gemm_epilogue.h).
  double best_us(int64_t rows, int64_t n, int64_t k, ir::DType dtype,
                 const ir::GemmEpilogue& epilogue = {});
  // Median µs of a device-to-device copy of `bytes`: the traffic of a pointwise kernel that
  // reads a tensor of that size once and writes it once. Copies as kReplayBudgetUs allows
  // (runtime/measure/replay_budget.h).
  double copy_us(int64_t bytes);
  // A time stored under `key` by graph_us (or another timing), if there is one.
  std::optional<double> cached_us(const std::string& key);
  // Median µs per forward of `plan` run as one CUDA graph at `rows` rows, on random values
  // drawn on the device (inputs U(-1, 1), params scaled as nn.Linear initializes them, so sums
  // stay in range: runtime/exec/device_random.h), GEMMs tuned: for a plan of one step
  // repeated, that step's time inside a compiled graph (what a step costs there, launch
  // overhead amortized as the graph amortizes it). `cubins` as for Executor. Cached under
  // `key` with the GEMM timings. Its GEMMs are tuned within their budget, then the graph is
  // replayed as kReplayBudgetUs allows (runtime/measure/replay_budget.h: a short plan many
  // times, a long one a few).
  double graph_us(const codegen::Plan& plan, const std::map<std::string, std::vector<char>>& cubins,
                  int64_t rows, const std::string& key);

 private:
  struct Timer;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace mlpc::runtime
