// The Chrome trace `mlpc bench --trace` writes, built from synthetic timings: valid JSON with the
// fields chrome://tracing and Perfetto need, one event per launch on each track, in order.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <limits>

#include "dump/trace_json.h"
#include "ir/error.h"

namespace {

mlpc::LaunchTiming launch(const std::string& name, const std::string& kind, double host, double gpu,
                          double gpu_dur, double flops = 0) {
  mlpc::LaunchTiming l;
  l.name = name;
  l.kind = kind;
  l.bytes = 1000000;
  l.flops = flops;
  l.host_begin_us = host;
  l.host_end_us = host + 2.5;
  l.gpu_begin_us = gpu;
  l.gpu_end_us = gpu + gpu_dur;
  return l;
}

std::vector<mlpc::ForwardTrace> geglu_like() {
  mlpc::ForwardTrace eager{"eager",
                           {launch("gemm_gate", "gemm", 0, 3, 55.8, 38.65e9),
                            launch("gemm_up", "gemm", 4, 59, 55.8, 38.65e9),
                            launch("mlpc_gelu_tanh_0", "pointwise", 8, 115, 29.6),
                            launch("mlpc_mul_1", "pointwise", 11, 145, 36.8),
                            launch("gemm_down", "gemm", 14, 182, 50.6, 38.65e9)}};
  mlpc::ForwardTrace compiled{"compiled",
                              {launch("gemm_gate", "gemm", 0, 3, 48.8, 38.65e9),
                               launch("gemm_up", "gemm", 4, 52, 48.8, 38.65e9),
                               launch("mlpc_fused_gelu_tanh_mul_0", "pointwise", 8, 101, 37.0),
                               launch("gemm_down", "gemm", 11, 138, 48.8, 38.65e9)}};
  return {eager, compiled};
}

}  // namespace

TEST_CASE("trace: valid JSON with the fields every event needs", "[trace]") {
  const nlohmann::json t = mlpc::chrome_trace(geglu_like(), {{"graph", "geglu"}});
  // What is written to the file parses back to the same thing.
  const nlohmann::json back = nlohmann::json::parse(t.dump(1));
  CHECK(back == t);
  REQUIRE(back.contains("traceEvents"));
  REQUIRE(back["traceEvents"].is_array());
  CHECK(back["otherData"]["graph"] == "geglu");
  for (const nlohmann::json& e : back["traceEvents"]) {
    INFO(e.dump());
    for (const char* field : {"ph", "name", "pid"}) REQUIRE(e.contains(field));
    if (e["ph"] == "M") continue;
    REQUIRE(e["ph"] == "X");
    for (const char* field : {"ts", "dur", "tid", "cat", "args"}) REQUIRE(e.contains(field));
    CHECK(e["ts"].get<double>() >= 0);
    CHECK(e["dur"].get<double>() >= 0);
    CHECK(e["args"].contains("step"));
  }
}

TEST_CASE("trace: one event per launch on each track, in launch order", "[trace]") {
  const std::vector<mlpc::ForwardTrace> forwards = geglu_like();
  const nlohmann::json t = mlpc::chrome_trace(forwards);
  // (pid, tid) -> the X events' names and start times, in file order.
  std::map<std::pair<int, int>, std::vector<std::pair<std::string, double>>> tracks;
  std::map<int, std::string> process_names;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name")
      process_names[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "X")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {e["name"].get<std::string>(), e["ts"].get<double>()});
  }
  CHECK(process_names == std::map<int, std::string>{{1, "mlpc eager forward"},
                                                    {2, "mlpc compiled forward"}});
  REQUIRE(tracks.size() == 4);
  for (size_t f = 0; f < forwards.size(); ++f) {
    const int pid = static_cast<int>(f) + 1;
    for (int tid : {mlpc::kGpuTrack, mlpc::kHostTrack}) {
      INFO("pid " << pid << " tid " << tid);
      const auto& events = tracks[{pid, tid}];
      REQUIRE(events.size() == forwards[f].launches.size());
      for (size_t i = 0; i < events.size(); ++i) {
        CHECK(events[i].first == forwards[f].launches[i].name);
        if (i > 0) CHECK(events[i].second >= events[i - 1].second);
      }
    }
  }
}

TEST_CASE("trace: bytes, FLOPs and rates ride in the GPU events' args", "[trace]") {
  const nlohmann::json t = mlpc::chrome_trace(geglu_like());
  int gemms = 0, pointwise = 0;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] != "X" || e["tid"] != mlpc::kGpuTrack) continue;
    CHECK(e["args"]["bytes"] == 1000000);
    if (e["cat"] == "gemm") {
      ++gemms;
      CHECK(e["args"]["flops"] == 38.65e9);
      CHECK(e["args"]["TFLOP/s"].get<double>() == Approx(38.65e9 / (e["dur"].get<double>() * 1e6)));
    } else {
      ++pointwise;
      CHECK_FALSE(e["args"].contains("flops"));
    }
    CHECK(e["args"]["GB/s"].get<double>() == Approx(1e6 / (e["dur"].get<double>() * 1e3)));
  }
  CHECK(gemms == 6);
  CHECK(pointwise == 3);
}

TEST_CASE("trace: an interval that ends before it begins is an error naming the launch",
          "[trace][error]") {
  auto forwards = geglu_like();
  forwards[1].launches[2].gpu_end_us = forwards[1].launches[2].gpu_begin_us - 1;
  CHECK_THROWS_WITH(mlpc::chrome_trace(forwards),
                    Catch::StartsWith("trace of the compiled forward: launch "
                                      "mlpc_fused_gelu_tanh_mul_0 has a bad GPU interval"));
  forwards = geglu_like();
  forwards[0].launches[0].host_begin_us = -3;
  CHECK_THROWS_WITH(mlpc::chrome_trace(forwards), Catch::Contains("bad host interval"));
  forwards = geglu_like();
  forwards[0].launches[1].gpu_end_us = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(mlpc::chrome_trace(forwards), mlpc::Error);
}

TEST_CASE("trace: no forwards is an empty but valid trace", "[trace]") {
  const nlohmann::json t = mlpc::chrome_trace({});
  CHECK(t["traceEvents"].empty());
  CHECK(t["displayTimeUnit"] == "ns");
}
