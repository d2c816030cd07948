// fusion.md in the dump folder: every fused group (its kernel, the IR nodes it computes, the HBM
// bytes it moves against what its ops would move one kernel each), then every fusion candidate,
// fused or rejected with its reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/compile.h"

namespace mlpc {

struct GroupTraffic {
  std::string kernel;                // the fused region's symbol
  std::vector<std::string> nodes;    // IR values it computes
  int64_t fused_bytes = 0;           // one kernel: its operands read once, its result written
  int64_t unfused_bytes = 0;         // each op its own kernel: every operand read, result written
  int64_t saved() const { return unfused_bytes - fused_bytes; }
};

// One entry per fused region (fused.pointwise, fused.reduction), in program order.
std::vector<GroupTraffic> group_traffic(const CompiledGraph& c, int64_t batch);
std::string fusion_markdown(const CompiledGraph& c, int64_t batch);

}  // namespace mlpc
