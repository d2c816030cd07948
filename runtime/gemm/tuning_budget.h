// How much GPU time tuning one GEMM key may take, and who gets it: the pure policy behind
// GemmTuner (runtime/gemm/gemm_tuner.h), fed with measured times and no GPU, so that CPU tests
// drive it with synthetic ones (tests/test_timing_budget.cpp). Short GEMMs are timed as they
// always were (every candidate kTuneMaxSamples times: it costs nothing); ms-long ones get one
// launch per candidate, lose those clearly slower than the best, and spend what is left of the
// budget on the close ones.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace mlpc::runtime {

// GPU time per GEMM key. An -O2 compile tunes a large GEMM several times (with and without its
// epilogue, in each layout a decision times), so this is what bounds its cold compile; it still
// pays for one launch of each of GemmTuner's candidates of a GEMM of a few ms plus the winner's
// kTuneMinSamples.
inline constexpr double kTuneBudgetUs = 60'000;
// The most timed launches per candidate: once every candidate has them, tuning stops whatever
// budget is left (more would refine a median that no decision reads that finely).
inline constexpr int kTuneMaxSamples = 15;
// The winner's reported time is a median of at least this many launches, whatever the budget:
// that time feeds -O2's decisions, and three launches outvote one disturbed one.
inline constexpr int kTuneMinSamples = 3;
// A candidate whose fastest launch is this much slower than the best's median is dropped: far
// beyond the launch-to-launch spread of one algorithm, so more launches would not change the
// order.
inline constexpr double kTuneDropMargin = 0.03;
// Survivors whose medians (kTuneMinSamples launches each) are all within this share of the best
// are a tie: the smallest margin an -O2 decision applies (compiler/gemm_decisions.h) is larger,
// so which one wins does not matter and more launches would only spend budget.
inline constexpr double kTuneTieShare = 0.005;
// A warm-up launch counts as a timed one when the GPU could not have idled inside its events
// for longer than this share of its time: the first launch of an algorithm may load its module
// on the host, and a host-side gap would be measured as GPU time.
inline constexpr double kCleanWarmupShare = 0.01;

struct TuningBudget {
  double budget_us = kTuneBudgetUs;
  int max_samples = kTuneMaxSamples;
  int min_samples = kTuneMinSamples;
  double drop_margin = kTuneDropMargin;
  double tie_share = kTuneTieShare;
};

// One cuBLASLt candidate's timings so far.
struct TunedCandidate {
  double warmup_us = 0;     // its warm-up launch's GPU time (an upper bound: may include gaps)
  std::vector<double> us;   // its timed launches (a clean warm-up among them)
  bool failed = false;      // did not launch
  bool dropped = false;     // clearly slower than the best
  // Its one timed launch is the warm-up pass's first, which ran on an idle GPU (clocks and
  // caches as something else left them): it is timed again before being dropped on it.
  bool after_idle = false;
  bool live() const { return !failed && !dropped; }
};

// Median of `v` (the mean of the middle two for an even count); 0 when empty.
double median_us(std::vector<double> v);

// Whether a warm-up launch's time counts as a timed launch: it was enqueued while the GPU was
// still busy with the one before (`queued_behind`: the GPU never waited for it), or its host
// call (enqueue, and any module load) took at most kCleanWarmupShare of its GPU time.
bool warmup_is_sample(double gpu_us, double enqueue_us, bool queued_behind);

// The next round for `c` after `spent_us` of GPU time on this key: how many timed launches each
// candidate gets (0 for those out); all zero when tuning is done. Marks the candidates it drops.
// Cheap keys (every candidate to b.max_samples fits the budget) get exactly that; others
// are probed once, lose the clearly slower ones, then the close ones (at least b.min_samples,
// then doubling) take one launch at a time in turn, the best first, while the budget lasts; the
// best always reaches b.min_samples.
std::vector<int> next_tuning_round(std::vector<TunedCandidate>& c, double spent_us,
                                   const TuningBudget& b = {});

// The live candidate with the lowest median, if any was timed.
std::optional<size_t> fastest_candidate(const std::vector<TunedCandidate>& c);

// One warm-up launch: did it launch, its GPU time, and whether that time counts as a sample.
struct WarmupLaunch {
  bool ok = false;
  double gpu_us = 0;
  bool sample = false;
};

// The whole tuning of one key, with the GPU behind two callbacks: `warm_up` launches every
// candidate once (the result has one entry per candidate), `timed` runs one round (launches per
// candidate) and returns each candidate's times, nullopt for one that failed to launch.
struct TuningOutcome {
  std::optional<size_t> best;  // nullopt: nothing could be timed
  double us = 0;               // the best's median
  int launches = 0;            // every launch, warm-ups included
  double gpu_us = 0;           // their GPU time
  std::vector<TunedCandidate> candidates;
};
using WarmUp = std::function<std::vector<WarmupLaunch>()>;
using TimedRound =
    std::function<std::vector<std::optional<std::vector<double>>>(const std::vector<int>&)>;
TuningOutcome run_tuning(const WarmUp& warm_up, const TimedRound& timed,
                         const TuningBudget& b = {});

}  // namespace mlpc::runtime
