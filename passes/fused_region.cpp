#include "passes/fused_region.h"

#include <algorithm>
#include <memory>
#include <queue>
#include <utility>
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

void walk_producers(const ir::Graph& g, uint32_t root,
                    const std::function<bool(uint32_t producer, uint32_t consumer)>& visit) {
  std::priority_queue<std::pair<uint32_t, uint32_t>> todo;  // (producer, consumer)
  std::set<uint32_t> queued;
  auto push_operands = [&](uint32_t consumer) {
    for (ir::NodeId o : g.nodes[consumer].operands)
      if (queued.insert(o.index).second) todo.push({o.index, consumer});
  };
  push_operands(root);
  while (!todo.empty()) {
    auto [producer, consumer] = todo.top();
    todo.pop();
    if (visit(producer, consumer)) push_operands(producer);
  }
}

}  // namespace mlpc::passes
