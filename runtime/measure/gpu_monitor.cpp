#include "runtime/measure/gpu_monitor.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <type_traits>

namespace mlpc::runtime {
namespace {

// The few NVML entry points used, as the C API declares them (nvml.h is not needed to build:
// the library is opened at run time). Every call returns 0 (NVML_SUCCESS) or an error code.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int;
constexpr int kNvmlClockSm = 1;  // nvmlClockType_t NVML_CLOCK_SM
constexpr unsigned kNvmlFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, mW
// nvmlFieldValue_t
struct NvmlFieldValue {
  unsigned field_id = 0, scope_id = 0;
  long long timestamp = 0, latency_us = 0;
  unsigned value_type = 0;
  NvmlReturn status = 0;
  union {
    double d;
    unsigned ui;
    unsigned long long ull;
  } value{};
};
static_assert(sizeof(NvmlFieldValue) == 40);

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*throttle_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*field_values)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  std::string unavailable;  // why NVML cannot be used, or empty

  std::string error(const char* call, NvmlReturn r) const {
    return fmt::format("NVML call {} failed: {} ({})", call, r, error_string ? error_string(r) : "?");
  }
};

// Opened and initialized once per process; left open (NVML keeps per-process state the driver
// tears down at exit).
const Nvml& nvml() {
  static const Nvml lib = [] {
    Nvml n;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      n.unavailable = fmt::format("no NVML (libnvidia-ml.so.1: {})", dlerror());
      return n;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && n.unavailable.empty()) n.unavailable = fmt::format("NVML has no {}", name);
    };
    sym(n.init, "nvmlInit_v2");
    sym(n.error_string, "nvmlErrorString");
    sym(n.handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(n.clock, "nvmlDeviceGetClockInfo");
    sym(n.max_clock, "nvmlDeviceGetMaxClockInfo");
    sym(n.power_usage, "nvmlDeviceGetPowerUsage");
    sym(n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    sym(n.throttle_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    // optional (older drivers): without it power is NVML's trailing 1 s average
    n.field_values = reinterpret_cast<decltype(n.field_values)>(dlsym(h, "nvmlDeviceGetFieldValues"));
    if (n.unavailable.empty())
      if (NvmlReturn r = n.init(); r != 0) n.unavailable = n.error("nvmlInit_v2", r);
    return n;
  }();
  return lib;
}

}  // namespace

struct GpuMonitor::Device {
  NvmlDevice handle = nullptr;
  unsigned max_sm_mhz = 0, power_limit_mw = 0;
};

GpuState summarize(const std::vector<GpuSample>& samples, unsigned max_sm_mhz,
                   unsigned power_limit_mw) {
  GpuState s;
  s.max_sm_mhz = max_sm_mhz;
  s.power_limit_w = power_limit_mw / 1000.0;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  s.sm_mhz_min = s.sm_mhz_max = samples[0].sm_mhz;
  for (const GpuSample& g : samples) {
    s.sm_mhz_mean += g.sm_mhz;
    s.sm_mhz_min = std::min<double>(s.sm_mhz_min, g.sm_mhz);
    s.sm_mhz_max = std::max<double>(s.sm_mhz_max, g.sm_mhz);
    s.power_w_mean += g.power_mw / 1000.0;
    s.power_capped += (g.reasons & kThrottleSwPowerCap) != 0;
    s.thermal += (g.reasons & kThrottleThermal) != 0;
    s.power_instant &= g.power_instant;
  }
  for (double* v : {&s.sm_mhz_mean, &s.power_w_mean, &s.power_capped, &s.thermal})
    *v /= s.samples;
  return s;
}

nlohmann::json to_json(const GpuState& s) {
  if (s.samples == 0)
    return {{"unavailable", s.unavailable.empty() ? "no samples" : s.unavailable}};
  return {{"samples", s.samples},           {"sm_mhz_mean", s.sm_mhz_mean},
          {"sm_mhz_min", s.sm_mhz_min},     {"sm_mhz_max", s.sm_mhz_max},
          {"max_sm_mhz", s.max_sm_mhz},     {"power_w_mean", s.power_w_mean},
          {"power_limit_w", s.power_limit_w},
          {"power_reading", s.power_instant ? "instant" : "1 s average"},
          {"power_capped", s.power_capped}, {"thermal", s.thermal}};
}

std::string describe(const GpuState& s) {
  if (s.samples == 0) return s.unavailable.empty() ? "no samples" : s.unavailable;
  std::string out = fmt::format("SM {:.0f} MHz ({:.0f}-{:.0f} of {}), {:.0f} of {:.0f} W{}",
                                s.sm_mhz_mean, s.sm_mhz_min, s.sm_mhz_max, s.max_sm_mhz,
                                s.power_w_mean, s.power_limit_w,
                                s.power_instant ? "" : " (1 s average)");
  out += fmt::format(", power cap {:.0f}%", 100 * s.power_capped);
  if (s.thermal > 0) out += fmt::format(", thermal/hardware slowdown {:.0f}%", 100 * s.thermal);
  return out + fmt::format(" of {} samples", s.samples);
}

GpuMonitor::GpuMonitor(double period_ms) : period_ms_(period_ms) {
  const Nvml& n = nvml();
  if (!n.unavailable.empty()) {
    unavailable_ = n.unavailable;
    return;
  }
  int device = 0;
  char bus_id[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
    cudaGetLastError();  // nothing to sample; leave no error behind for the caller's next check
    unavailable_ = "no current CUDA device";
    return;
  }
  auto d = std::make_unique<Device>();
  if (NvmlReturn r = n.handle_by_pci_bus_id(bus_id, &d->handle); r != 0) {
    unavailable_ = n.error("nvmlDeviceGetHandleByPciBusId_v2", r);
    return;
  }
  // Either may be unsupported (e.g. on a MIG slice): the summary then shows 0.
  n.max_clock(d->handle, kNvmlClockSm, &d->max_sm_mhz);
  n.power_limit(d->handle, &d->power_limit_mw);
  device_ = std::move(d);
}

GpuMonitor::~GpuMonitor() {
  if (running_) stop();
}

void GpuMonitor::start() {
  if (!device_ || running_) return;
  samples_.clear();
  running_ = true;
  thread_ = std::thread([this] {
    const Nvml& n = nvml();
    const auto period = std::chrono::duration<double, std::milli>(period_ms_);
    while (running_) {
      GpuSample g;
      if (n.clock(device_->handle, kNvmlClockSm, &g.sm_mhz) == 0) {
        NvmlFieldValue f;
        f.field_id = kNvmlFieldPowerInstant;
        if (n.field_values && n.field_values(device_->handle, 1, &f) == 0 && f.status == 0) {
          g.power_mw = f.value.ui;
        } else {
          g.power_instant = false;
          n.power_usage(device_->handle, &g.power_mw);
        }
        n.throttle_reasons(device_->handle, &g.reasons);
        std::lock_guard<std::mutex> lock(mutex_);
        samples_.push_back(g);
      }
      std::this_thread::sleep_for(period);
    }
  });
}

GpuState GpuMonitor::stop() {
  if (running_) {
    running_ = false;
    thread_.join();
  }
  GpuState s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = summarize(samples_, device_ ? device_->max_sm_mhz : 0,
                  device_ ? device_->power_limit_mw : 0);
  }
  if (s.samples == 0) s.unavailable = device_ ? "no samples" : unavailable_;
  return s;
}

}  // namespace mlpc::runtime
