#include "compiler/gemm_decisions.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <numeric>

#include "runtime/device/device.h"
#include "runtime/measure/gemm_bench.h"

namespace mlpc {

passes::GemmMergeDecision decide_merge(double merged_us, const std::vector<double>& apart_us,
                                       int64_t rows) {
  const double apart = std::accumulate(apart_us.begin(), apart_us.end(), 0.0);
  const bool measured = merged_us > 0 && std::all_of(apart_us.begin(), apart_us.end(),
                                                     [](double us) { return us > 0; });
  if (!measured) return {false, "could not time the GEMMs"};
  const bool merge = merged_us < apart * (1.0 - kMergeMinGain);
  return {merge, fmt::format("measured at M={}: {:.1f} us merged vs {:.1f} us for {} GEMMs",
                             rows, merged_us, apart, apart_us.size())};
}

passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows) {
  switch (mode) {
    case MergeGemms::Off: return {};
    case MergeGemms::On:
      return [](const passes::GemmMergeCandidate&) {
        return passes::GemmMergeDecision{true, "asked for (--merge-gemms on)"};
      };
    case MergeGemms::Measure: break;
  }
  if (auto why = runtime::gpu_unavailable_reason())
    return [](const passes::GemmMergeCandidate&) {
      return passes::GemmMergeDecision{false, "no GPU to measure on"};
    };
  // One bench for every candidate of this compile; created on the first candidate.
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows](const passes::GemmMergeCandidate& c) {
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    std::vector<double> apart;
    int64_t total_n = 0;
    for (int64_t n : c.n) {
      apart.push_back((*bench)->best_us(rows, n, c.k, c.dtype));
      total_n += n;
    }
    return decide_merge((*bench)->best_us(rows, total_n, c.k, c.dtype), apart, rows);
  };
}

passes::EpilogueDecision decide_epilogue(double epilogue_us, double plain_us, double kernel_us,
                                         int64_t rows) {
  if (!(epilogue_us > 0 && plain_us > 0)) return {true, "could not time the GEMMs (the rule)"};
  const bool fold = epilogue_us <= (plain_us + kernel_us) * (1.0 + kEpilogueNoise);
  std::string alternative = kernel_us > 0 ? fmt::format("{:.1f} + {:.1f} us for a kernel of its "
                                                        "own", plain_us, kernel_us)
                                          : fmt::format("{:.1f} us with it in the fused kernel",
                                                        plain_us);
  return {fold, fmt::format("measured at M={}: {:.1f} us vs {}", rows, epilogue_us, alternative)};
}

passes::EpilogueDecider epilogue_decider(bool measure, int64_t rows) {
  if (!measure || runtime::gpu_unavailable_reason()) return {};
  auto bench = std::make_shared<std::unique_ptr<runtime::GemmBench>>();
  return [bench, rows](const passes::EpilogueCandidate& c) {
    if (c.from.residual || c.to.residual)  // GemmBench times no residual
      return passes::EpilogueDecision{true, "the rule (residuals are not timed)"};
    if (!*bench) *bench = std::make_unique<runtime::GemmBench>();
    runtime::GemmBench& b = **bench;
    const double kernel =
        c.removes_kernel
            ? b.copy_us(rows * c.n * static_cast<int64_t>(ir::dtype_size(c.dtype)))
            : 0.0;
    return decide_epilogue(b.best_us(rows, c.n, c.k, c.dtype, c.to),
                           b.best_us(rows, c.n, c.k, c.dtype, c.from), kernel, rows);
  };
}

}  // namespace mlpc
