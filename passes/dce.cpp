#include "passes/dce.h"

#include "passes/rebuild.h"

namespace mlpc::passes {

bool dce(ir::Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (size_t i = g.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    if (n.op == ir::Op::Return || n.op == ir::Op::Input) live[i] = true;
    if (!live[i]) continue;
    for (ir::NodeId o : n.operands) live[o.index] = true;
  }
  bool any_dead = false;
  for (bool l : live) any_dead |= !l;
  if (!any_dead) return false;
  Rebuild r(g);
  for (const ir::Node& n : g.nodes)
    if (live[g.id_of(n).index]) r.copy(n);
  g = r.finish();
  return true;
}

}  // namespace mlpc::passes
