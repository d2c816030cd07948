// `mlpc bench --trace FILE.json`: a Chrome trace (chrome://tracing, ui.perfetto.dev) of one eager
// and one compiled forward. One process per forward; in each, a "GPU stream" track with one
// interval per launch (CUDA events around it) and a "host launches" track with the launch call's
// own interval. Kernel names are the plan's step names; bytes and FLOPs ride in args.
// Building the JSON is pure, so it is tested on CPU from synthetic timings.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlpc {

struct LaunchTiming {
  std::string name, kind;  // step name and "gemm" | "pointwise" | ...
  int64_t bytes = 0;
  double flops = 0;
  double host_begin_us = 0, host_end_us = 0;  // the launch call, on the host clock
  double gpu_begin_us = 0, gpu_end_us = 0;    // its work on the GPU (CUDA events)
};

struct ForwardTrace {
  std::string label;  // "eager", "compiled"
  std::vector<LaunchTiming> launches;  // in launch order; times from the forward's start
};

// Thread ids of the two tracks in each forward's process.
inline constexpr int kGpuTrack = 1;
inline constexpr int kHostTrack = 2;

// {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": `meta`}. Throws mlpc::Error when
// an interval ends before it begins or a time is negative or not finite.
nlohmann::json chrome_trace(const std::vector<ForwardTrace>& forwards,
                            const nlohmann::json& meta = nlohmann::json::object());

}  // namespace mlpc
