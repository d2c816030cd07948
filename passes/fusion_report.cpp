#include "passes/fusion_report.h"

#include <fmt/format.h>

namespace mlpc::passes {

std::string FusionReport::to_string() const {
  std::string out;
  for (const FusionDecision& d : decisions) {
    const char* v = d.verdict == Verdict::Fused        ? "fused"
                    : d.verdict == Verdict::Recomputed ? "recomputed"
                                                       : "not fused";
    out += fmt::format("{}: %{} -> %{}: {} ({})\n", d.group, d.producer, d.consumer, v, d.reason);
  }
  return out;
}

const FusionDecision* FusionReport::find(const std::string& producer,
                                         const std::string& consumer) const {
  for (const FusionDecision& d : decisions)
    if (d.producer == producer && d.consumer == consumer) return &d;
  return nullptr;
}

}  // namespace mlpc::passes
