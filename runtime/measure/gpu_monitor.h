// What the GPU did while a measurement ran: its SM clock, its power draw, and what held the clock
// down, sampled through NVML (the driver's management library, opened at run time, so that mlpc
// builds and runs where there is no driver).
//
// Why bench reports it: a long stream of large GEMMs is power-bound. Its clock falls well below
// the maximum, and the same launches differ from one run to the next as the GPU warms
// (docs/benchmarks.md, "What limits"). A time means little without the clock it ran at, and
// "compute-bound at the power-capped clock" is a verdict of its own.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mlpc::runtime {

struct GpuSample {
  unsigned sm_mhz = 0;
  unsigned power_mw = 0;
  unsigned long long reasons = 0;  // NVML's clock throttle reasons, a bit mask
  bool power_instant = true;       // power_mw is instantaneous, not NVML's trailing 1 s average
};

// NVML's throttle-reason bits that bench names.
inline constexpr unsigned long long kThrottleSwPowerCap = 0x4;
inline constexpr unsigned long long kThrottleThermal = 0x8 | 0x20 | 0x40 | 0x80;  // HW slowdown,
                                                                                  // SW/HW thermal,
                                                                                  // power brake

struct GpuState {
  int samples = 0;
  double sm_mhz_mean = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  unsigned max_sm_mhz = 0;  // the GPU's highest SM clock
  double power_w_mean = 0, power_limit_w = 0;
  double power_capped = 0;  // share of samples with the power cap holding the clock down
  double thermal = 0;       // share of samples with a thermal or hardware slowdown
  // Every power reading instantaneous. NVML's plain power reading is a trailing 1 s average on
  // Hopper: over a short stream after idle it reads far below the cap that holds the clock.
  bool power_instant = true;
  std::string unavailable;  // why there are no samples (no driver, NVML error), or empty
};

// The summary of `samples` on a GPU whose highest SM clock is max_sm_mhz and power limit
// power_limit_mw.
GpuState summarize(const std::vector<GpuSample>& samples, unsigned max_sm_mhz,
                   unsigned power_limit_mw);

// {"samples", "sm_mhz_mean", "sm_mhz_min", "sm_mhz_max", "max_sm_mhz", "power_w_mean",
//  "power_limit_w", "power_reading" ("instant" or "1 s average"), "power_capped", "thermal"}, or
// {"unavailable": why}.
nlohmann::json to_json(const GpuState& s);

// One line: "SM 1410 MHz (1290-1755 of 1980), 688 of 700 W, power cap 94% of 151 samples".
std::string describe(const GpuState& s);

// Samples the current CUDA device every period_ms, on a thread of its own, from start() to stop().
class GpuMonitor {
 public:
  explicit GpuMonitor(double period_ms = 5.0);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  void start();
  GpuState stop();  // the samples since start(); GpuState::unavailable says why there are none

 private:
  struct Device;
  std::unique_ptr<Device> device_;  // null when NVML or the device is not there
  std::string unavailable_;
  double period_ms_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<GpuSample> samples_;
};

}  // namespace mlpc::runtime
