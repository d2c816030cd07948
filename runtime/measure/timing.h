// Host-timed forwards, as the bench contract asks: per-forward time over a stream of
// back-to-back calls (launch overhead included), median and min over repetitions.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "runtime/exec/executor.h"

namespace mlpc::runtime {

struct Timing {
  double median_us = 0;  // per forward
  double min_us = 0;
  int iters = 0;  // forwards per repetition
  int reps = 0;
};

struct TimingOptions {
  int warmup = 3;            // forwards before calibration
  int reps = 15;
  double min_rep_ms = 20.0;  // iters is chosen so one repetition lasts at least this long
  int max_iters = 100000;
};

// Times `forward(stream)`: warm-up, calibration of iters, then `reps` repetitions of `iters`
// back-to-back calls timed with steady_clock up to a cudaStreamSynchronize.
Timing time_calls(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                  const TimingOptions& opts = {});

// Times Executor::run. With stream == nullptr a private non-blocking stream is used.
Timing time_forward(Executor& ex, cudaStream_t stream = nullptr, const TimingOptions& opts = {});

// Times `forward` within `budget_us` of GPU time (runtime/measure/replay_budget.h): one
// forward is timed alone first (one of opts.warmup, or one more when that is 0), and its time
// picks the schedule. When opts' whole schedule fits the budget, that is what runs (as
// time_calls, less that warm-up); otherwise as many single forwards as fit, at least
// kMinReplays, that first one among them (iters is then 1).
Timing time_calls_within(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                         double budget_us, const TimingOptions& opts = {});
// Executor::run timed so, on `stream` (a private non-blocking one when nullptr).
Timing time_forward_within(Executor& ex, cudaStream_t stream, double budget_us,
                           const TimingOptions& opts = {});

}  // namespace mlpc::runtime
