#include "compiler/gemm_decisions.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace mlpc {

std::string DecisionTiming::key() const {
  if (copy_bytes > 0) return fmt::format("copy|{}", copy_bytes);
  return fmt::format("gemm|{}x{}x{}|{}|{}", rows, n, k, ir::dtype_name(dtype),
                     ir::epilogue_formula(epilogue));
}

std::optional<double> DecisionTimes::find(const DecisionTiming& t) {
  const std::string key = t.key();
  if (auto it = us.find(key); it != us.end()) return it->second;
  if (std::none_of(missing.begin(), missing.end(),
                   [&](const DecisionTiming& m) { return m.key() == key; }))
    missing.push_back(t);
  return std::nullopt;
}

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

passes::GemmMergeDecider merge_decider(MergeGemms mode, int64_t rows, DecisionTimes* times) {
  switch (mode) {
    case MergeGemms::Off: return {};
    case MergeGemms::On:
      return [](const passes::GemmMergeCandidate&) {
        return passes::GemmMergeDecision{true, "asked for (--merge-gemms on)"};
      };
    case MergeGemms::Measure: break;
  }
  if (!times)
    return [](const passes::GemmMergeCandidate&) {
      return passes::GemmMergeDecision{false, "no GPU to measure on"};
    };
  return [times, rows](const passes::GemmMergeCandidate& c) {
    // Every time is looked up before deciding, so one round records all that are missing.
    std::vector<std::optional<double>> apart;
    int64_t total_n = 0;
    for (int64_t n : c.n) {
      apart.push_back(times->find({.rows = rows, .n = n, .k = c.k, .dtype = c.dtype}));
      total_n += n;
    }
    const std::optional<double> merged =
        times->find({.rows = rows, .n = total_n, .k = c.k, .dtype = c.dtype});
    if (!merged || std::any_of(apart.begin(), apart.end(), [](auto& a) { return !a; }))
      return passes::GemmMergeDecision{false, "not timed yet"};
    std::vector<double> apart_us;
    for (const auto& a : apart) apart_us.push_back(*a);
    return decide_merge(*merged, apart_us, rows);
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

passes::EpilogueDecider epilogue_decider(int64_t rows, DecisionTimes* times) {
  if (!times) return {};
  return [times, rows](const passes::EpilogueCandidate& c) {
    if (c.from.residual || c.to.residual)  // GemmBench times no residual
      return passes::EpilogueDecision{true, "the rule (residuals are not timed)"};
    const DecisionTiming gemm{.rows = rows, .n = c.n, .k = c.k, .dtype = c.dtype};
    DecisionTiming with = gemm, without = gemm;
    with.epilogue = c.to;
    without.epilogue = c.from;
    const std::optional<double> to = times->find(with), from = times->find(without);
    std::optional<double> kernel = 0.0;
    if (c.removes_kernel)
      kernel = times->find(
          {.copy_bytes = rows * c.n * static_cast<int64_t>(ir::dtype_size(c.dtype))});
    if (!to || !from || !kernel) return passes::EpilogueDecision{true, "not timed yet"};
    return decide_epilogue(*to, *from, *kernel, rows);
  };
}

}  // namespace mlpc
