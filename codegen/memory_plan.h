// Where each activation lives in the one device arena: buffers whose lifetimes (from the step
// that writes them to the last step that reads them) do not overlap share memory. Inputs and
// outputs live through the whole forward; params live outside the arena.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/plan.h"

namespace mlpc::codegen {

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer; -1 for params
  int64_t arena_bytes = 0;       // with reuse
  int64_t unshared_bytes = 0;    // what one slot per buffer would take
};

inline constexpr int64_t kArenaAlignment = 256;  // cuBLASLt and 16-byte vector accesses

MemoryPlan plan_memory(const Plan& plan, int64_t batch);

}  // namespace mlpc::codegen
