// The row space of a fused.reduction region: the kernel runs a warp or a block per row, so every
// value in it must be a full row tensor [L.., N], a per-row value [L.., 1] (a kept-dim reduction)
// or a row vector [N] (a weight, a bias, or one computed from row vectors only).
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace mlpc::ir {

enum class RowRole { Full, PerRow, RowVector };

struct RowSpace {
  Shape full;            // [L.., N]
  int64_t row_len = 1;   // N
  // The role of a value of shape `s` in this space (Full wins when N == 1).
  std::optional<RowRole> role(const Shape& s) const;
};

// The row space of `body`, taken from its first reduction's operand (else from its widest
// value); nullopt when the body has no value of rank >= 1.
std::optional<RowSpace> row_space_of(const Graph& body);

// "" when every value of `body` fits its row space and every reduction reads a full row;
// otherwise one line naming the offending value.
std::string row_space_error(const Graph& body);

}  // namespace mlpc::ir
