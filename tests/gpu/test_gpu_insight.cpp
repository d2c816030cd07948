// On the GPU: the trace recorder (one interval per launch, in order, on both tracks), the
// calibrated peaks (plausible, cached) and explain on a real bench.
#include <catch2/catch.hpp>

#include <filesystem>

#include "dump/bench_explain.h"
#include "dump/trace_recorder.h"
#include "compiler/samples.h"
#include "runtime/measure/calibrate.h"

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

TEST_CASE("explain: 3xTF32 GEMMs are held against the calibrated TF32 peak", "[gpu][explain]") {
  runtime::DevicePeaks p = runtime::device_peaks(ir::DType::F32);
  INFO(peaks_text(p));
  REQUIRE(p.gemm_tflops.count(runtime::kTf32Peak));
  // TF32 tensor cores do several times the FLOPs of fp32 FMAs.
  CHECK(p.gemm_tflops.at(runtime::kTf32Peak) > 2 * p.gemm_tflops.at("f32"));
  CompileOptions o;
  o.fp32_gemms = Fp32Gemms::Tf32x3;
  std::vector<BenchResult> r = bench(make_sample("mlp3"), {2048}, 7, o);
  REQUIRE(r.size() == 1);
  nlohmann::json e = explain_bench_json(r[0], p);
  INFO(e["compiled"].dump(1));
  int tf32x3 = 0;
  for (const nlohmann::json& k : e["compiled"]["kernels"]) {
    if (!k["tf32x3"].get<bool>()) continue;
    ++tf32x3;
    // At most its peak (with noise), where against fp32's it would read as ~2-4x over.
    CHECK(k["flop_share"].get<double>() < 1.1);
    CHECK(k["flop_share"].get<double>() > 0.05);
  }
  CHECK(tf32x3 >= 3);  // fc1, fc2, fc3, each in K-chunks
}

TEST_CASE("bench: the SM clock and power while each mode was timed", "[gpu][gpu_monitor]") {
  // A driver brings NVML: every timed stream is sampled (every 5 ms over >= 300 ms).
  std::vector<BenchResult> r = bench(make_sample("geglu"), {4096}, 7);
  REQUIRE(r.size() == 1);
  for (const ModeResult* m : {&r[0].eager, &r[0].compiled}) {
    const runtime::GpuState& s = m->gpu;
    INFO(runtime::describe(s));
    CHECK(s.unavailable.empty());
    CHECK(s.samples > 20);
    CHECK(s.sm_mhz_min > 100);
    CHECK(s.sm_mhz_mean <= s.sm_mhz_max);
    if (s.max_sm_mhz > 0) CHECK(s.sm_mhz_max <= s.max_sm_mhz);
    CHECK(s.power_w_mean > 10);
    if (s.power_limit_w > 0) CHECK(s.power_w_mean < 1.2 * s.power_limit_w);
    CHECK(to_json(r[0])["modes"]["compiled"]["gpu"]["samples"] == r[0].compiled.gpu.samples);
  }
}
