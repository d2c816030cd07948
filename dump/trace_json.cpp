#include "dump/trace_json.h"

#include <fmt/format.h>

#include <cmath>

#include "ir/error.h"

namespace mlpc {
namespace {

void check_interval(const ForwardTrace& f, const LaunchTiming& l, const char* what, double begin,
                    double end) {
  if (!std::isfinite(begin) || !std::isfinite(end) || begin < 0 || end < begin)
    throw Error(fmt::format("trace of the {} forward: launch {} has a bad {} interval [{}, {}] us",
                            f.label, l.name, what, begin, end));
}

nlohmann::json metadata(const char* what, int pid, int tid, const std::string& name) {
  nlohmann::json e = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

nlohmann::json chrome_trace(const std::vector<ForwardTrace>& forwards, const nlohmann::json& meta) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t f = 0; f < forwards.size(); ++f) {
    const ForwardTrace& fw = forwards[f];
    const int pid = static_cast<int>(f) + 1;
    events.push_back(metadata("process_name", pid, -1, fmt::format("mlpc {} forward", fw.label)));
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid},
                      {"args", {{"sort_index", pid}}}});
    events.push_back(metadata("thread_name", pid, kGpuTrack, "GPU stream"));
    events.push_back(metadata("thread_name", pid, kHostTrack, "host launches"));
    for (size_t i = 0; i < fw.launches.size(); ++i) {
      const LaunchTiming& l = fw.launches[i];
      check_interval(fw, l, "GPU", l.gpu_begin_us, l.gpu_end_us);
      check_interval(fw, l, "host", l.host_begin_us, l.host_end_us);
      const double gpu_us = l.gpu_end_us - l.gpu_begin_us;
      nlohmann::json args = {{"step", i}, {"kind", l.kind}, {"bytes", l.bytes}};
      if (gpu_us > 0) args["GB/s"] = l.bytes / (gpu_us * 1e3);
      if (l.flops > 0) {
        args["flops"] = l.flops;
        if (gpu_us > 0) args["TFLOP/s"] = l.flops / (gpu_us * 1e6);
      }
      events.push_back({{"ph", "X"}, {"name", l.name}, {"cat", l.kind}, {"pid", pid},
                        {"tid", kGpuTrack}, {"ts", l.gpu_begin_us}, {"dur", gpu_us},
                        {"args", args}});
      events.push_back({{"ph", "X"}, {"name", l.name}, {"cat", "launch"}, {"pid", pid},
                        {"tid", kHostTrack}, {"ts", l.host_begin_us},
                        {"dur", l.host_end_us - l.host_begin_us},
                        {"args", {{"step", i}, {"kind", l.kind}}}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}, {"otherData", meta}};
}

}  // namespace mlpc
