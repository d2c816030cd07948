#include "runtime/measure/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "runtime/device/cuda_check.h"
#include "runtime/measure/replay_budget.h"

namespace mlpc::runtime {
namespace {

// Seconds for `iters` back-to-back calls, up to the stream being drained.
double time_loop(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                 int iters) {
  MLPC_CUDA(cudaStreamSynchronize(stream));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) forward(stream);
  MLPC_CUDA(cudaStreamSynchronize(stream));
  auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

Timing time_calls(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                  const TimingOptions& opts) {
  MLPC_ASSERT(opts.reps > 0 && opts.max_iters > 0, "bad timing options");
  for (int i = 0; i < opts.warmup; ++i) forward(stream);
  MLPC_CUDA(cudaStreamSynchronize(stream));

  // Calibrate: grow the loop until it lasts a tenth of a repetition, so the per-forward
  // estimate is not dominated by one call's jitter.
  const double min_rep_s = opts.min_rep_ms * 1e-3;
  int probe = 1;
  double per_call = time_loop(forward, stream, probe);
  while (per_call * probe < min_rep_s / 10 && probe < opts.max_iters) {
    probe = std::min(probe * 4, opts.max_iters);
    per_call = time_loop(forward, stream, probe) / probe;
  }
  double want = per_call > 0 ? std::ceil(min_rep_s / per_call) : opts.max_iters;
  const int iters = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(opts.max_iters)));

  std::vector<double> us(opts.reps);
  for (int r = 0; r < opts.reps; ++r) us[r] = time_loop(forward, stream, iters) / iters * 1e6;
  std::sort(us.begin(), us.end());
  const int n = opts.reps;
  double median = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  return Timing{median, us.front(), iters, n};
}

Timing time_calls_within(const std::function<void(cudaStream_t)>& forward, cudaStream_t stream,
                         double budget_us, const TimingOptions& opts) {
  MLPC_ASSERT(opts.reps > 0 && opts.max_iters > 0, "bad timing options");
  const double first_us = time_loop(forward, stream, 1) * 1e6;
  const ReplaySchedule plan =
      replay_schedule(first_us, {std::max(opts.warmup - 1, 0), opts.reps, opts.min_rep_ms},
                      budget_us);
  if (plan.full) {
    TimingOptions rest = opts;
    rest.warmup = std::max(opts.warmup - 1, 0);
    return time_calls(forward, stream, rest);
  }
  std::vector<double> us = {first_us};
  while (static_cast<int>(us.size()) < plan.reps) us.push_back(time_loop(forward, stream, 1) * 1e6);
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  const double median = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  return Timing{median, us.front(), 1, static_cast<int>(n)};
}

namespace {

// `f` on `stream`, or on a private non-blocking stream when it is null.
Timing on_stream(cudaStream_t stream, const std::function<Timing(cudaStream_t)>& f) {
  cudaStream_t own = nullptr;
  if (!stream) {
    MLPC_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    stream = own;
  }
  try {
    Timing t = f(stream);
    if (own) MLPC_CUDA(cudaStreamDestroy(own));
    return t;
  } catch (...) {
    if (own) cudaStreamDestroy(own);
    throw;
  }
}

}  // namespace

Timing time_forward(Executor& ex, cudaStream_t stream, const TimingOptions& opts) {
  return on_stream(stream, [&](cudaStream_t s) {
    return time_calls([&](cudaStream_t t) { ex.run(t); }, s, opts);
  });
}

Timing time_forward_within(Executor& ex, cudaStream_t stream, double budget_us,
                           const TimingOptions& opts) {
  return on_stream(stream, [&](cudaStream_t s) {
    return time_calls_within([&](cudaStream_t t) { ex.run(t); }, s, budget_us, opts);
  });
}

}  // namespace mlpc::runtime
