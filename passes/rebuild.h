// Rebuilds a graph node by node into a fresh Builder, remapping operand ids; the shared tool of
// the passes, which never edit a graph in place.
#pragma once

#include <vector>

#include "ir/builder.h"

namespace mlpc::passes {

class Rebuild {
 public:
  explicit Rebuild(const ir::Graph& old) : old_(old), b_(old.name, old.batch_symbol),
                                           map_(old.size()) {}

  // Copies `n` with its operands remapped; returns the new id, also recorded for `n`.
  ir::NodeId copy(const ir::Node& n) {
    ir::Node c = n;
    for (ir::NodeId& o : c.operands) o = map_[o.index];
    return map_[old_.id_of(n).index] = b_.add(std::move(c));
  }
  // Adds `replacement` (operands already in new ids) in place of old node `old_node`.
  ir::NodeId replace(ir::NodeId old_node, ir::Node replacement) {
    return map_[old_node.index] = b_.add(std::move(replacement));
  }
  // Makes uses of old node `from` read new node `to` instead.
  void alias(ir::NodeId from, ir::NodeId to) { map_[from.index] = to; }
  ir::NodeId mapped(ir::NodeId old_id) const { return map_[old_id.index]; }
  ir::Builder& builder() { return b_; }
  ir::Graph finish() { return b_.finish(); }

 private:
  const ir::Graph& old_;
  ir::Builder b_;
  std::vector<ir::NodeId> map_;
};

}  // namespace mlpc::passes
