// `mlpc bench --explain`: where the time goes. Each kernel's achieved TFLOP/s and GB/s against
// the device's measured peaks (runtime/measure/calibrate.h), and a verdict per kernel and
// per forward:
//   overhead-bound  the time is fixed cost, not work: the GPU sits idle between launches, or the
//                   kernels are too small to reach even a modest share of either peak;
//   memory-bound    the bandwidth share decides (and is the larger one);
//   compute-bound   the FLOP/s share decides.
// Each verdict carries the figure that decided it. The logic is pure and tested on CPU.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlpc {

enum class Bound { Overhead, Memory, Compute };
std::string_view bound_name(Bound b);  // "overhead-bound", ...

// A kernel whose better share of a peak is below this spends its time on fixed cost.
inline constexpr double kOverheadPeakShare = 0.30;
// A forward is overhead-bound when its GPU is busy less than this share of the forward ...
inline constexpr double kOverheadBusyShare = 0.50;
// ... or when its work at peak speed would take less than this share of the forward.
inline constexpr double kOverheadIdealShare = 0.30;

struct Peaks {
  double gbps = 0;    // copy bandwidth (bytes read + written)
  double tflops = 0;  // GEMM throughput in the graph's dtype
  std::string dtype;  // "bf16", for the figures
  // TF32 tensor-core GEMM throughput (f32 graphs; 0: not calibrated). A 3xTF32 GEMM does three
  // TF32 products for each of its (fp32) FLOPs, so it is held against tf32_tflops / 3.
  double tf32_tflops = 0;
};

struct KernelSample {
  std::string name, kind;  // the plan's step name; "gemm" | "pointwise" | ...
  double us = 0;           // GPU time of one launch
  int64_t bytes = 0;
  double flops = 0;
  bool tf32x3 = false;  // a GEMM as three TF32 products (codegen/tf32x3.h)
};

struct KernelExplain {
  KernelSample k;
  double gbps = 0, tflops = 0;
  double bw_share = 0, flop_share = 0;  // of the peaks, 0..1 (may exceed 1 on noise)
  double ideal_us = 0;                  // at peak: max(bytes / peak bandwidth, flops / peak)
  Bound bound = Bound::Overhead;
  std::string why;
};

struct ForwardExplain {
  std::vector<KernelExplain> kernels;
  double forward_us = 0;  // host-timed per forward, launch overhead included
  double busy_us = 0;     // sum of the kernels' GPU times
  double ideal_us = 0;    // sum of their times at peak
  Bound bound = Bound::Overhead;
  std::string why;
};

// Throws mlpc::Error when a peak or forward_us is not positive, a kernel time is negative, or a
// 3xTF32 kernel meets no TF32 peak.
KernelExplain explain_kernel(const KernelSample& k, const Peaks& peaks);
ForwardExplain explain_forward(const std::vector<KernelSample>& kernels, double forward_us,
                               const Peaks& peaks);

// The bench's per-step JSON (ModeResult::steps: name, kind, us, bytes, flops, tf32x3) as samples.
std::vector<KernelSample> samples_from_steps(const nlohmann::json& steps);

// A table: kernel, kind, µs, GFLOP, MB, TFLOP/s, % of peak, GB/s, % of peak, verdict (figure);
// then the forward's verdict.
std::string explain_text(const ForwardExplain& e, const std::string& title);
nlohmann::json explain_json(const ForwardExplain& e);

}  // namespace mlpc
