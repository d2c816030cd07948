#include "runtime/jit/build_log.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

namespace mlpc::runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> on{false};
std::atomic<Clock::rep> origin{Clock::now().time_since_epoch().count()};
std::atomic<int> threads{0};

std::string_view from_text(BuildEvent::From f) {
  switch (f) {
    case BuildEvent::From::Nvrtc: return "NVRTC";
    case BuildEvent::From::DiskCache: return "on-disk cache";
    case BuildEvent::From::InFlight: return "waited for another thread's build";
    case BuildEvent::From::Failed: return "NVRTC failed after";
  }
  return "?";
}

}  // namespace

void set_build_log(bool enable) {
  if (enable) origin = Clock::now().time_since_epoch().count();
  on = enable;
}

bool build_log_on() { return on; }

int build_log_thread() {
  thread_local const int mine = ++threads;
  return mine;
}

double build_log_now_ms() {
  const Clock::duration since = Clock::now().time_since_epoch() - Clock::duration(origin.load());
  return std::chrono::duration<double, std::milli>(since).count();
}

namespace {

// "[mlpc:builds] +  93.3 ms  thread 2   ": what every line of the log starts with.
std::string line_start(double start_ms, int thread) {
  return fmt::format("[mlpc:builds] +{:7.1f} ms  thread {:<2}  ", start_ms, thread);
}

}  // namespace

std::string build_log_line(const BuildEvent& e) {
  return line_start(e.start_ms, e.thread) +
         fmt::format("{} ({}): {} {:.1f} ms\n", e.kernel, e.target, from_text(e.from), e.ms);
}

namespace {

void write_line(const std::string& line) {
  static std::mutex m;
  std::lock_guard lock(m);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void log_build(const BuildEvent& e) {
  if (on) write_line(build_log_line(e));
}

std::string timing_log_line(const TimingEvent& e) {
  return line_start(e.start_ms, e.thread) +
         fmt::format("timed {}: setup {:.1f} ms, timing {:.1f} ms ({:.1f} us)\n", e.plan,
                     e.setup_ms, e.timing_ms, e.us);
}

void log_timing(const TimingEvent& e) {
  if (on) write_line(timing_log_line(e));
}

}  // namespace mlpc::runtime
