// The GPU monitor's summary and its text, and the monitor itself where there is no GPU to sample
// (the GPU side: tests/gpu/test_gpu_insight.cpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "runtime/measure/gpu_monitor.h"

using namespace mlpc;
using runtime::GpuSample;

TEST_CASE("GPU monitor: a summary of samples, as JSON and as one line", "[gpu_monitor]") {
  // 1410 and 1990 MHz at 690 and 510 W; the cap holds the first, a thermal slowdown neither
  const std::vector<GpuSample> samples = {{1410, 690000, runtime::kThrottleSwPowerCap},
                                          {1410, 690000, runtime::kThrottleSwPowerCap | 0x1},
                                          {1990, 510000, 0},
                                          {1830, 600000, 0x20}};
  const runtime::GpuState s = runtime::summarize(samples, 1980, 700000);
  CHECK(s.samples == 4);
  CHECK(s.sm_mhz_mean == Approx(1660));
  CHECK(s.sm_mhz_min == 1410);
  CHECK(s.sm_mhz_max == 1990);
  CHECK(s.power_w_mean == Approx(622.5));
  CHECK(s.power_limit_w == 700);
  CHECK(s.power_capped == 0.5);
  CHECK(s.thermal == 0.25);
  CHECK(runtime::describe(s) ==
        "SM 1660 MHz (1410-1990 of 1980), 622 of 700 W, power cap 50%, thermal/hardware "
        "slowdown 25% of 4 samples");
  const nlohmann::json j = runtime::to_json(s);
  CHECK(j["sm_mhz_mean"] == Approx(1660));
  CHECK(j["power_capped"] == 0.5);
  CHECK(j["max_sm_mhz"] == 1980);
  CHECK(j["power_reading"] == "instant");
  CHECK_FALSE(j.contains("unavailable"));

  // no slowdown: the line leaves it out
  CHECK(runtime::describe(runtime::summarize({{1980, 300000, 0}}, 1980, 700000)) ==
        "SM 1980 MHz (1980-1980 of 1980), 300 of 700 W, power cap 0% of 1 samples");
  // one reading that fell back on NVML's trailing average: the power says so
  const runtime::GpuState avg = runtime::summarize({{1980, 300000, 0}, {1980, 500000, 0, false}}, 1980, 700000);
  CHECK_FALSE(avg.power_instant);
  CHECK(runtime::describe(avg) ==
        "SM 1980 MHz (1980-1980 of 1980), 400 of 700 W (1 s average), power cap 0% of 2 samples");
  CHECK(runtime::to_json(avg)["power_reading"] == "1 s average");
}

TEST_CASE("GPU monitor: no samples says why, in the line and the JSON", "[gpu_monitor]") {
  runtime::GpuState s = runtime::summarize({}, 0, 0);
  CHECK(s.samples == 0);
  CHECK(runtime::describe(s) == "no samples");
  s.unavailable = "no NVML (libnvidia-ml.so.1: cannot open shared object file)";
  CHECK(runtime::describe(s) == s.unavailable);
  CHECK(runtime::to_json(s) == nlohmann::json{{"unavailable", s.unavailable}});
}

TEST_CASE("GPU monitor: samples exactly when it can read the GPU, and says why not", "[gpu_monitor]") {
  // Without a driver (CI) there is no NVML: start and stop still work, and the reason is kept.
  // With one, the samples are the GPU's.
  runtime::GpuMonitor monitor(1.0);
  monitor.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const runtime::GpuState s = monitor.stop();
  INFO(runtime::describe(s));
  CHECK((s.samples == 0) == !s.unavailable.empty());
  if (s.samples > 0) {
    CHECK(s.sm_mhz_min > 0);
    CHECK(s.sm_mhz_max >= s.sm_mhz_min);
  }
  CHECK(monitor.stop().samples == s.samples);  // stopping again keeps what was sampled
}
