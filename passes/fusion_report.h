// Every fusion decision with its reason (style.md #6), printed by `mlpc compile` and asserted on
// in tests.
#pragma once

#include <string>
#include <vector>

namespace mlpc::passes {

enum class Verdict { Fused, Recomputed, Rejected };

struct FusionDecision {
  std::string group;     // kernel symbol of the consumer's group
  std::string producer;  // value name of the candidate producer
  std::string consumer;  // value name of the group member that reads it
  Verdict verdict = Verdict::Rejected;
  std::string reason;
};

struct FusionReport {
  std::vector<FusionDecision> decisions;
  // "group  producer -> consumer: verdict (reason)" lines, in decision order.
  std::string to_string() const;
  // The decision about `producer` feeding `consumer`, or nullptr.
  const FusionDecision* find(const std::string& producer, const std::string& consumer) const;
};

}  // namespace mlpc::passes
