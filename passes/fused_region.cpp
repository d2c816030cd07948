#include "passes/fused_region.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace mlpc::passes {

ir::Node make_fused_region(const ir::Graph& g, ir::Op op, const std::set<uint32_t>& members,
                           uint32_t root, const std::string& symbol, const Rebuild& outer) {
  std::vector<ir::NodeId> inputs;
  for (uint32_t i : members)
    for (ir::NodeId o : g.nodes[i].operands)
      if (!members.count(o.index) && std::find(inputs.begin(), inputs.end(), o) == inputs.end())
        inputs.push_back(o);

  ir::Builder body(symbol, g.batch_symbol);
  std::vector<ir::NodeId> map(g.size());
  for (ir::NodeId o : inputs) map[o.index] = body.input(g.node(o).name, g.node(o).type);
  for (uint32_t i : members) {  // a std::set: program order
    ir::Node c = g.nodes[i];
    for (ir::NodeId& o : c.operands) o = map[o.index];
    map[i] = body.add(std::move(c));
  }
  body.ret({map[root]});

  ir::Node fused;
  fused.op = op;
  fused.name = g.nodes[root].name;
  fused.symbol = symbol;
  fused.loc = g.nodes[root].loc;
  fused.body = std::make_shared<const ir::Graph>(body.finish());
  for (ir::NodeId o : inputs) fused.operands.push_back(outer.mapped(o));
  return fused;
}

}  // namespace mlpc::passes
