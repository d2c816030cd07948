// On the GPU: the trace recorder (one interval per launch, in order, on both tracks), the
// calibrated peaks (plausible, cached) and explain on a real bench.
#include <catch2/catch.hpp>

#include <filesystem>

#include "compiler/bench_explain.h"
#include "compiler/gpu_trace.h"
#include "compiler/samples.h"
#include "runtime/calibrate.h"

using namespace mlpc;

TEST_CASE("trace: one recorded interval per launch, in launch order", "[gpu][trace]") {
  const ir::Graph g = make_sample("geglu");
  const CompiledGraph c = compile(g, {});
  ForwardTrace t = record_forward(g, c, 256, 7, {}, "compiled");
  REQUIRE(t.launches.size() == c.plan.steps.size());
  for (size_t i = 0; i < t.launches.size(); ++i) {
    const LaunchTiming& l = t.launches[i];
    INFO(l.name);
    CHECK(l.gpu_end_us > l.gpu_begin_us);
    CHECK(l.host_end_us >= l.host_begin_us);
    if (i > 0) {
      CHECK(l.gpu_begin_us >= t.launches[i - 1].gpu_end_us);
      CHECK(l.host_begin_us >= t.launches[i - 1].host_end_us);
    }
  }
  const nlohmann::json trace = trace_bench(g, 256, 7, {}, {});
  int gpu_events = 0;
  for (const nlohmann::json& e : trace["traceEvents"])
    gpu_events += e["ph"] == "X" && e["tid"] == kGpuTrack;
  CHECK(gpu_events == 5 + 4);  // eager: 3 GEMMs, gelu_tanh, mul; compiled: 3 GEMMs, one fused
}

TEST_CASE("calibration: plausible peaks, cached per device", "[gpu][explain]") {
  runtime::DevicePeaks p = runtime::device_peaks(ir::DType::BF16);
  INFO(peaks_text(p));
  CHECK(p.copy_gbps > 100);
  CHECK(p.gemm_tflops.at("bf16") > 10);
  if (!p.cache_file.empty()) {
    CHECK(std::filesystem::is_regular_file(p.cache_file));
    runtime::DevicePeaks again = runtime::device_peaks(ir::DType::BF16);
    CHECK(again.from_cache);
    CHECK(again.copy_gbps == p.copy_gbps);
  }
}

TEST_CASE("explain: a real bench of geglu at 8192 is GEMM-dominated", "[gpu][explain]") {
  std::vector<BenchResult> r = bench(make_sample("geglu"), {8192}, 7);
  REQUIRE(r.size() == 1);
  nlohmann::json e = explain_bench_json(r[0], runtime::device_peaks(ir::DType::BF16));
  INFO(e.dump(1));
  CHECK(e["compiled"]["verdict"] == "compute-bound");
  CHECK(e["compiled"]["kernels"][2]["verdict"] == "memory-bound");
}
