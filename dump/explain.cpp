#include "dump/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace mlpc {
namespace {

double pct(double share) { return 100.0 * share; }

}  // namespace

std::string_view bound_name(Bound b) {
  switch (b) {
    case Bound::Overhead: return "overhead-bound";
    case Bound::Memory: return "memory-bound";
    case Bound::Compute: return "compute-bound";
  }
  return "?";
}

KernelExplain explain_kernel(const KernelSample& k, const Peaks& peaks) {
  if (!(peaks.gbps > 0) || !(peaks.tflops > 0))
    throw Error(fmt::format("explain: the device peaks must be positive (got {} GB/s, {} TFLOP/s)",
                            peaks.gbps, peaks.tflops));
  if (!(k.us >= 0) || !std::isfinite(k.us) || k.bytes < 0 || !(k.flops >= 0))
    throw Error(fmt::format("explain: kernel {}: bad timing ({} us, {} bytes, {} FLOP)", k.name,
                            k.us, k.bytes, k.flops));
  if (k.tf32x3 && !(peaks.tf32_tflops > 0))
    throw Error(fmt::format("explain: kernel {} runs on TF32 tensor cores (3xTF32) but no TF32 "
                            "peak was calibrated", k.name));
  // What its FLOP/s are held against: the dtype's GEMM peak, or a third of TF32's for 3xTF32.
  const double peak_tflops = k.tf32x3 ? peaks.tf32_tflops / 3 : peaks.tflops;
  const std::string peak_name = k.tf32x3 ? "3xTF32" : peaks.dtype;
  KernelExplain e;
  e.k = k;
  e.ideal_us = std::max(k.bytes / (peaks.gbps * 1e3), k.flops / (peak_tflops * 1e6));
  if (k.us > 0) {
    e.gbps = k.bytes / (k.us * 1e3);
    e.tflops = k.flops / (k.us * 1e6);
  }
  e.bw_share = e.gbps / peaks.gbps;
  e.flop_share = e.tflops / peak_tflops;
  const bool flops_lead = e.flop_share >= e.bw_share;
  const double best = std::max(e.bw_share, e.flop_share);
  if (best < kOverheadPeakShare) {
    e.bound = Bound::Overhead;
    e.why = fmt::format("{:.0f}% of peak {} at best in {:.1f} us: too little work to fill the GPU",
                        pct(best), flops_lead ? peak_name + " FLOP/s" : "bandwidth", k.us);
  } else if (flops_lead) {
    e.bound = Bound::Compute;
    e.why = fmt::format("{:.0f}% of peak {} TFLOP/s ({:.0f} of {:.0f})", pct(e.flop_share),
                        peak_name, e.tflops, peak_tflops);
  } else {
    e.bound = Bound::Memory;
    e.why = fmt::format("{:.0f}% of copy bandwidth ({:.0f} of {:.0f} GB/s)", pct(e.bw_share),
                        e.gbps, peaks.gbps);
  }
  return e;
}

ForwardExplain explain_forward(const std::vector<KernelSample>& kernels, double forward_us,
                               const Peaks& peaks) {
  if (!(forward_us > 0) || !std::isfinite(forward_us))
    throw Error(fmt::format("explain: the forward time must be positive (got {} us)", forward_us));
  ForwardExplain f;
  f.forward_us = forward_us;
  double us_by_bound[3] = {0, 0, 0};
  bool compute_all_gemm = true;
  for (const KernelSample& k : kernels) {
    KernelExplain e = explain_kernel(k, peaks);
    f.busy_us += k.us;
    f.ideal_us += e.ideal_us;
    us_by_bound[static_cast<int>(e.bound)] += k.us;
    if (e.bound == Bound::Compute && k.kind != "gemm" && k.kind != "gated_gemm")
      compute_all_gemm = false;
    f.kernels.push_back(std::move(e));
  }
  // Steps timed alone can add up to more than a CUDA-graph forward: the share is capped at 1.
  const double busy_share = std::min(1.0, f.busy_us / forward_us);
  const double ideal_share = f.ideal_us / forward_us;
  if (busy_share < kOverheadBusyShare) {
    f.bound = Bound::Overhead;
    f.why = fmt::format("GPU busy {:.0f}% of the {:.1f} us forward: idle between launches",
                        pct(busy_share), forward_us);
    return f;
  }
  if (ideal_share < kOverheadIdealShare) {
    f.bound = Bound::Overhead;
    f.why = fmt::format("its work at peak would take {:.2f} us of the {:.1f} us forward ({:.0f}%): "
                        "fixed per-launch cost and latency dominate",
                        f.ideal_us, forward_us, pct(ideal_share));
    return f;
  }
  const int top = static_cast<int>(std::max_element(us_by_bound, us_by_bound + 3) - us_by_bound);
  f.bound = static_cast<Bound>(top);
  const double share = f.busy_us > 0 ? us_by_bound[top] / f.busy_us : 0;
  switch (f.bound) {
    case Bound::Compute:
      f.why = fmt::format("{}compute-bound {} take {:.0f}% of GPU time",
                          compute_all_gemm ? "GEMM-dominated: " : "",
                          compute_all_gemm ? "GEMMs" : "kernels", pct(share));
      break;
    case Bound::Memory:
      f.why = fmt::format("memory-bound kernels take {:.0f}% of GPU time", pct(share));
      break;
    case Bound::Overhead:
      f.why = fmt::format("kernels too small to fill the GPU take {:.0f}% of GPU time", pct(share));
      break;
  }
  return f;
}

std::vector<KernelSample> samples_from_steps(const nlohmann::json& steps) {
  std::vector<KernelSample> out;
  for (const nlohmann::json& s : steps) {
    KernelSample k;
    k.name = s.at("name").get<std::string>();
    k.kind = s.at("kind").get<std::string>();
    k.us = s.at("us").get<double>();
    k.bytes = s.at("bytes").get<int64_t>();
    k.flops = s.value("flops", 0.0);
    k.tf32x3 = s.value("tf32x3", false);
    out.push_back(std::move(k));
  }
  return out;
}

std::string explain_text(const ForwardExplain& e, const std::string& title) {
  std::string out = fmt::format("  {}\n", title);
  out += fmt::format("    {:<32} {:<9} {:>8} {:>8} {:>8} {:>8} {:>5} {:>7} {:>5}  {}\n", "kernel",
                     "kind", "us", "GFLOP", "MB", "TFLOP/s", "%pk", "GB/s", "%pk", "verdict");
  for (const KernelExplain& k : e.kernels)
    out += fmt::format("    {:<32} {:<9} {:>8.1f} {:>8.2f} {:>8.2f} {:>8.1f} {:>4.0f}% {:>7.0f} "
                       "{:>4.0f}%  {}: {}\n",
                       k.k.name, k.k.kind, k.k.us, k.k.flops / 1e9, k.k.bytes / 1e6, k.tflops,
                       pct(k.flop_share), k.gbps, pct(k.bw_share), bound_name(k.bound), k.why);
  out += fmt::format("    forward {:.1f} us, GPU busy {:.1f} us, at peak {:.2f} us -> {}: {}\n",
                     e.forward_us, e.busy_us, e.ideal_us, bound_name(e.bound), e.why);
  return out;
}

nlohmann::json explain_json(const ForwardExplain& e) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelExplain& k : e.kernels)
    kernels.push_back({{"name", k.k.name}, {"kind", k.k.kind}, {"us", k.k.us},
                       {"bytes", k.k.bytes}, {"flops", k.k.flops}, {"tf32x3", k.k.tf32x3},
                       {"gbps", k.gbps},
                       {"tflops", k.tflops}, {"bw_share", k.bw_share},
                       {"flop_share", k.flop_share}, {"ideal_us", k.ideal_us},
                       {"verdict", bound_name(k.bound)}, {"why", k.why}});
  return {{"forward_us", e.forward_us}, {"busy_us", e.busy_us}, {"ideal_us", e.ideal_us},
          {"verdict", bound_name(e.bound)}, {"why", e.why}, {"kernels", kernels}};
}

}  // namespace mlpc
