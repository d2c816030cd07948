// MLPC_LOGS=builds: one stderr line per kernel a CachedCompiler hands out, as it happens — where
// the CUBIN came from (NVRTC, the on-disk cache, or another thread's build of it in flight),
// which thread asked, when it asked and how long it took, in ms since the compile began. It shows
// what a cold compile waits for: compile() builds kernels ahead on other threads
// (compiler/speculative_builds.h) and a measured decision waits for the ones it times.
#pragma once

#include <string>

namespace mlpc::runtime {

// On or off for this process; turning it on restarts the clock. compile() sets it from MLPC_LOGS.
void set_build_log(bool on);
bool build_log_on();

struct BuildEvent {
  std::string kernel, target;  // the kernel's name; "sm_90a"
  enum class From { Nvrtc, DiskCache, InFlight, Failed } from = From::Nvrtc;
  int thread = 0;         // a small per-thread number, in order of first use
  double start_ms = 0.0;  // when it was asked for, since the clock started
  double ms = 0.0;        // until it was handed out (or failed)
};

// "[mlpc:builds] +  93.3 ms  thread 2  NAME (sm_90a): NVRTC 30.1 ms", pure.
std::string build_log_line(const BuildEvent& e);
// This thread's number and the clock's reading now, for an event about to be timed.
int build_log_thread();
double build_log_now_ms();
// Writes build_log_line(e) to stderr when the log is on (one write per line: lines of concurrent
// builds do not interleave).
void log_build(const BuildEvent& e);

// A measured decision timing a plan once its kernels are built: how long its setup (the
// executor, its buffers and modules, random operands) and its timing (the first run, which tunes
// the GEMMs and captures the CUDA graph, then warm-up and repetitions) took — what a cold compile
// waits for after the builds.
struct TimingEvent {
  std::string plan;       // the first step's name and how many steps
  int thread = 0;
  double start_ms = 0.0;  // since the clock started
  double setup_ms = 0.0, timing_ms = 0.0;
  double us = 0.0;        // the measured µs per forward
};
// "[mlpc:builds] +  93.3 ms  thread 2  timed NAME: setup 4.1 ms, timing 15.2 ms (116.3 us)", pure.
std::string timing_log_line(const TimingEvent& e);
void log_timing(const TimingEvent& e);

}  // namespace mlpc::runtime
