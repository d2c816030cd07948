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

}  // namespace mlpc::runtime
