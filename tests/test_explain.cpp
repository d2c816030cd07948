// `mlpc bench --explain` verdicts from synthetic timings (round peaks of a Hopper GPU: 4000 GB/s
// copy, 790 bf16 TFLOP/s), and the calibration cache's JSON.
#include <catch2/catch.hpp>

#include "dump/explain.h"
#include "ir/error.h"
#include "runtime/measure/calibrate.h"

namespace {

const mlpc::Peaks kH200{.gbps = 4000, .tflops = 790, .dtype = "bf16"};

mlpc::KernelSample gemm(const std::string& name, double us, double flops, int64_t bytes) {
  return {.name = name, .kind = "gemm", .us = us, .bytes = bytes, .flops = flops};
}
mlpc::KernelSample pointwise(const std::string& name, double us, int64_t bytes) {
  return {.name = name, .kind = "pointwise", .us = us, .bytes = bytes, .flops = 0};
}

// geglu at x[8192, 768]: 38.65 GFLOP and 67.6 MB per GEMM, 151 MB through the fused kernel.
constexpr double kGemmFlops = 2.0 * 8192 * 768 * 3072;
constexpr int64_t kGemmBytes = 67633152;
constexpr int64_t kPointwiseBytes = 150994944;

}  // namespace

TEST_CASE("explain: a GEMM at 80% of peak FLOP/s is compute-bound", "[explain]") {
  const double us = kGemmFlops / (0.8 * 790e6);
  mlpc::KernelExplain e = mlpc::explain_kernel(gemm("gemm_gate", us, kGemmFlops, kGemmBytes), kH200);
  CHECK(e.bound == mlpc::Bound::Compute);
  CHECK(e.flop_share == Approx(0.8));
  CHECK(e.tflops == Approx(632));
  CHECK(e.why == "80% of peak bf16 TFLOP/s (632 of 790)");
  CHECK(e.ideal_us == Approx(kGemmFlops / 790e6));
}

TEST_CASE("explain: a 3xTF32 GEMM is held against a third of the TF32 peak, not fp32's",
          "[explain]") {
  // A 3xTF32 chunk of mlp3's fc1, timed as on the GPU machine: 2*8192*4096*1024 FLOP. Against
  // IEEE fp32's ~51 TFLOP/s it would read as far over 100%; it runs on TF32 tensor cores.
  const mlpc::Peaks f32{.gbps = 4000, .tflops = 51, .dtype = "f32", .tf32_tflops = 360};
  const double flops = 2.0 * 8192 * 4096 * 1024;
  mlpc::KernelSample k = gemm("gemm_h1_chunk0", flops / (0.75 * 120e6), flops, 50331648);
  k.tf32x3 = true;
  mlpc::KernelExplain e = mlpc::explain_kernel(k, f32);
  CHECK(e.flop_share == Approx(0.75));
  CHECK(e.bound == mlpc::Bound::Compute);
  CHECK(e.why == "75% of peak 3xTF32 TFLOP/s (90 of 120)");
  CHECK(e.ideal_us == Approx(flops / 120e6));
  // The same GEMM as IEEE fp32 is held against the f32 peak.
  k.tf32x3 = false;
  CHECK(mlpc::explain_kernel(k, f32).flop_share == Approx(90.0 / 51));
  // With no TF32 peak there is nothing honest to hold it against.
  k.tf32x3 = true;
  mlpc::Peaks no_tf32 = f32;
  no_tf32.tf32_tflops = 0;
  CHECK_THROWS_WITH(mlpc::explain_kernel(k, no_tf32),
                    "explain: kernel gemm_h1_chunk0 runs on TF32 tensor cores (3xTF32) but no "
                    "TF32 peak was calibrated");
}

TEST_CASE("explain: a kernel at 90% of copy bandwidth is memory-bound", "[explain]") {
  const double us = kPointwiseBytes / (0.9 * 4000e3);
  mlpc::KernelExplain e =
      mlpc::explain_kernel(pointwise("mlpc_fused_gelu_tanh_mul_0", us, kPointwiseBytes), kH200);
  CHECK(e.bound == mlpc::Bound::Memory);
  CHECK(e.bw_share == Approx(0.9));
  CHECK(e.why == "90% of copy bandwidth (3600 of 4000 GB/s)");
}

TEST_CASE("explain: a kernel far from both peaks is overhead-bound", "[explain]") {
  // linear's bias add: 1024 x 64 bf16 in and out, 2.5 us.
  mlpc::KernelExplain e = mlpc::explain_kernel(pointwise("mlpc_add_0", 2.5, 262272), kH200);
  CHECK(e.bound == mlpc::Bound::Overhead);
  CHECK(e.why == "3% of peak bandwidth at best in 2.5 us: too little work to fill the GPU");
  // Just at the threshold it is the share that decides.
  const double us = kPointwiseBytes / (mlpc::kOverheadPeakShare * 4000e3);
  CHECK(mlpc::explain_kernel(pointwise("k", us, kPointwiseBytes), kH200).bound ==
        mlpc::Bound::Memory);
  CHECK(mlpc::explain_kernel(pointwise("k", us * 1.01, kPointwiseBytes), kH200).bound ==
        mlpc::Bound::Overhead);
}

TEST_CASE("explain: a forward whose GPU is mostly idle is overhead-bound", "[explain]") {
  // Kernels near peak, but the GPU works 5 us of a 14 us forward: launches are the cost.
  const double us = kPointwiseBytes / (0.9 * 4000e3) / 10;
  std::vector<mlpc::KernelSample> ks = {pointwise("a", us, kPointwiseBytes / 10),
                                        pointwise("b", 5 - us, kPointwiseBytes / 10)};
  mlpc::ForwardExplain f = mlpc::explain_forward(ks, 14.0, kH200);
  CHECK(f.bound == mlpc::Bound::Overhead);
  CHECK(f.busy_us == Approx(5));
  CHECK(f.why == "GPU busy 36% of the 14.0 us forward: idle between launches");
}

TEST_CASE("explain: geglu at x[8192, 768] is GEMM-dominated, its pointwise kernel memory-bound",
          "[explain]") {
  std::vector<mlpc::KernelSample> ks = {gemm("gemm_gate", 61.9, kGemmFlops, kGemmBytes),
                                        gemm("gemm_up", 62.3, kGemmFlops, kGemmBytes),
                                        pointwise("mlpc_fused_gelu_tanh_mul_0", 40.7, kPointwiseBytes),
                                        gemm("gemm_down", 62.1, kGemmFlops, kGemmBytes)};
  mlpc::ForwardExplain f = mlpc::explain_forward(ks, 225.5, kH200);
  REQUIRE(f.kernels.size() == 4);
  CHECK(f.kernels[0].bound == mlpc::Bound::Compute);
  CHECK(f.kernels[2].bound == mlpc::Bound::Memory);
  CHECK(f.kernels[2].bw_share == Approx(0.927).epsilon(0.01));
  CHECK(f.bound == mlpc::Bound::Compute);
  CHECK(f.why == "GEMM-dominated: compute-bound GEMMs take 82% of GPU time");
  const std::string text = mlpc::explain_text(f, "compiled:");
  CHECK(text.find("mlpc_fused_gelu_tanh_mul_0") != std::string::npos);
  CHECK(text.find("-> compute-bound: GEMM-dominated") != std::string::npos);
  const nlohmann::json j = mlpc::explain_json(f);
  CHECK(j["verdict"] == "compute-bound");
  CHECK(j["kernels"][2]["verdict"] == "memory-bound");
}

TEST_CASE("explain: geglu at decode size is overhead-bound though the GPU is busy", "[explain]") {
  // x[16, 768]: each GEMM streams 4.7 MB of weights in ~4.5 us, far from the copy peak; the
  // whole forward's work at peak would take ~3.6 us of 15.2.
  const double flops = 2.0 * 16 * 768 * 3072;
  const int64_t bytes = 3072 * 768 * 2 + 16 * (768 + 3072) * 2;
  std::vector<mlpc::KernelSample> ks = {gemm("gemm_gate", 4.5, flops, bytes),
                                        gemm("gemm_up", 4.5, flops, bytes),
                                        pointwise("mlpc_fused_gelu_tanh_mul_0", 2.0, 3 * 16 * 3072 * 2),
                                        gemm("gemm_down", 4.5, flops, bytes)};
  mlpc::ForwardExplain f = mlpc::explain_forward(ks, 15.2, kH200);
  for (const mlpc::KernelExplain& k : f.kernels) CHECK(k.bound == mlpc::Bound::Overhead);
  CHECK(f.bound == mlpc::Bound::Overhead);
  CHECK(f.why.rfind("its work at peak would take 3.", 0) == 0);
  CHECK(f.why.find("of the 15.2 us forward") != std::string::npos);
}

TEST_CASE("explain: a pointwise-heavy forward is memory-bound", "[explain]") {
  std::vector<mlpc::KernelSample> ks = {gemm("gemm_a", 10, 0.8 * 790e6 * 10, 1000000),
                                        pointwise("p", 100, static_cast<int64_t>(0.85 * 4000e3 * 100))};
  mlpc::ForwardExplain f = mlpc::explain_forward(ks, 115, kH200);
  CHECK(f.bound == mlpc::Bound::Memory);
  CHECK(f.why == "memory-bound kernels take 91% of GPU time");
}

TEST_CASE("explain: bad peaks or timings are errors", "[explain][error]") {
  CHECK_THROWS_WITH(mlpc::explain_kernel(pointwise("k", 1, 1), {.gbps = 0, .tflops = 1}),
                    Catch::StartsWith("explain: the device peaks must be positive"));
  CHECK_THROWS_WITH(mlpc::explain_kernel(pointwise("k", -1, 1), kH200),
                    Catch::StartsWith("explain: kernel k: bad timing"));
  CHECK_THROWS_WITH(mlpc::explain_forward({}, 0, kH200),
                    Catch::StartsWith("explain: the forward time must be positive"));
}

TEST_CASE("explain: samples come from the bench's per-step JSON", "[explain]") {
  nlohmann::json steps = nlohmann::json::array(
      {{{"name", "gemm_y"}, {"kind", "gemm"}, {"us", 3.0}, {"bytes", 266240}, {"flops", 4194304.0}},
       {{"name", "mlpc_add_0"}, {"kind", "pointwise"}, {"us", 2.0}, {"bytes", 262272}},
       {{"name", "gemm_h"}, {"kind", "gemm"}, {"us", 9.0}, {"bytes", 1}, {"flops", 8.0},
        {"tf32x3", true}}});
  std::vector<mlpc::KernelSample> ks = mlpc::samples_from_steps(steps);
  REQUIRE(ks.size() == 3);
  CHECK(ks[0].flops == 4194304.0);
  CHECK_FALSE(ks[0].tf32x3);
  CHECK(ks[2].tf32x3);
  CHECK(ks[1].flops == 0);
  CHECK(ks[1].bytes == 262272);
}

TEST_CASE("calibration: peaks round-trip through their cache JSON", "[explain]") {
  mlpc::runtime::DevicePeaks p;
  p.device = "NVIDIA H200";
  p.copy_gbps = 4012.5;
  p.gemm_tflops = {{"bf16", 702.0}, {"f32", 51.0}, {mlpc::runtime::kTf32Peak, 360.0}};
  mlpc::runtime::DevicePeaks back = mlpc::runtime::peaks_from_json(mlpc::runtime::peaks_to_json(p));
  CHECK(back.device == p.device);
  CHECK(back.copy_gbps == p.copy_gbps);
  CHECK(back.gemm_tflops == p.gemm_tflops);
  CHECK(mlpc::runtime::peaks_file_name("NVIDIA H200 (SXM) 141GB") ==
        "peaks-NVIDIA_H200__SXM__141GB.json");
}

TEST_CASE("calibration: a malformed cache file is an error naming the field", "[explain][error]") {
  nlohmann::json good = {{"format", "mlpc-peaks-v1"}, {"device", "X"}, {"copy_gbps", 1.0},
                         {"gemm_tflops", {{"bf16", 2.0}}}};
  CHECK_NOTHROW(mlpc::runtime::peaks_from_json(good));
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = good;
    j[key] = std::move(v);
    return j;
  };
  using mlpc::runtime::peaks_from_json;
  CHECK_THROWS_WITH(peaks_from_json(nlohmann::json::array()), "device peaks: not a JSON object");
  CHECK_THROWS_WITH(peaks_from_json(with("format", "v0")), Catch::Contains("\"format\""));
  CHECK_THROWS_WITH(peaks_from_json(with("copy_gbps", -1)), Catch::Contains("\"copy_gbps\""));
  CHECK_THROWS_WITH(peaks_from_json(with("copy_gbps", "fast")), Catch::Contains("\"copy_gbps\""));
  CHECK_THROWS_WITH(peaks_from_json(with("gemm_tflops", {{"bf16", 0}})),
                    Catch::Contains("\"gemm_tflops\".bf16"));
  CHECK_THROWS_WITH(peaks_from_json(with("gemm_tflops", {{"fp8", 1}})),
                    Catch::Contains("unknown dtype 'fp8'"));
  CHECK_THROWS_WITH(peaks_from_json(with("device", 3)), Catch::Contains("\"device\""));
}
