// How many times a measurement replays what it times (a plan's CUDA graph in GemmBench::graph_us,
// a device copy in copy_us), chosen from one first timing: short ones keep the full schedule
// (calibrated repetitions: they cost nothing), long ones get a few single replays within a budget
// of GPU time. Pure, for CPU tests (tests/test_timing_budget.cpp).
#pragma once

namespace mlpc::runtime {

// GPU time per timed alternative of an -O2 decision: a decision times two or three of them, and
// a compile makes a few decisions, so this keeps their share of a cold compile in tens of ms each
// while the full schedule of a short plan (warm-up, calibration, repetitions) fits in it.
inline constexpr double kReplayBudgetUs = 30'000;
// At least this many timed replays whatever they cost: a median of three outvotes one disturbed
// replay, which one or two could not.
inline constexpr int kMinReplays = 3;

// The full schedule: `warmup` more forwards, then `reps` repetitions of back-to-back forwards
// lasting at least `min_rep_ms` each (runtime/measure/timing.h's TimingOptions).
struct FullSchedule {
  int warmup = 0;
  int reps = 0;
  double min_rep_ms = 0;
};

struct ReplaySchedule {
  bool full = true;  // the full schedule
  int reps = 0;      // otherwise: this many single replays, the first timing among them
};

// The GPU time the full schedule takes for replays of `first_us` each (its calibration included).
double full_schedule_us(double first_us, const FullSchedule& full);

// From the first timing of one replay: the full schedule when it fits `budget_us`, else as many
// single replays as fit, at least kMinReplays and at most full.reps.
ReplaySchedule replay_schedule(double first_us, const FullSchedule& full,
                               double budget_us = kReplayBudgetUs);

}  // namespace mlpc::runtime
