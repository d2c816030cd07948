#include "ir/row_space.h"

#include <fmt/format.h>

namespace mlpc::ir {

std::optional<RowRole> RowSpace::role(const Shape& s) const {
  if (s == full) return RowRole::Full;
  Shape per_row = full;
  per_row.dims.back() = 1;
  if (s == per_row) return RowRole::PerRow;
  if (s.rank() == 1 && s.dims[0] == row_len) return RowRole::RowVector;
  return std::nullopt;
}

std::optional<RowSpace> row_space_of(const Graph& body) {
  for (const Node& n : body.nodes)
    if (is_reduction(n.op)) {
      const Shape& s = body.node(n.operands[0]).type.shape;
      return RowSpace{s, s.last()};
    }
  // No reduction (a lone per-row broadcast): the widest value of the highest rank.
  const Shape* best = nullptr;
  for (const Node& n : body.nodes) {
    if (n.op == Op::Return || n.type.shape.rank() == 0) continue;
    const Shape& s = n.type.shape;
    if (!best || s.rank() > best->rank() || (s.rank() == best->rank() && s.last() > best->last()))
      best = &s;
  }
  if (!best) return std::nullopt;
  return RowSpace{*best, best->last()};
}

std::string row_space_error(const Graph& body) {
  std::optional<RowSpace> space = row_space_of(body);
  if (!space) return "a fused.reduction region needs a value of rank >= 1";
  for (const Node& n : body.nodes) {
    if (n.op == Op::Return) continue;
    std::optional<RowRole> r = space->role(n.type.shape);
    // A row vector is an input, or computed from row vectors only (a weight cast to f32).
    bool ok = r.has_value();
    if (ok && *r == RowRole::RowVector && n.op != Op::Input)
      for (NodeId o : n.operands)
        ok = ok && space->role(body.node(o).type.shape) == RowRole::RowVector;
    if (ok && is_reduction(n.op))
      ok = space->role(body.node(n.operands[0]).type.shape) == RowRole::Full;
    if (!ok)
      return fmt::format("region value %{} ({}) is outside the region's rows {}: a fused.reduction "
                         "holds full rows, per-row values [.., 1] and row vectors [N]",
                         n.name, to_string(n.type, body.batch_symbol),
                         to_string(space->full, body.batch_symbol));
  }
  return "";
}

}  // namespace mlpc::ir
