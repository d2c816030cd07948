#include "ir/graph.h"

namespace mlpc::ir {
namespace {

std::vector<NodeId> ids_with_op(const Graph& g, Op op) {
  std::vector<NodeId> out;
  for (const Node& n : g.nodes)
    if (n.op == op) out.push_back(g.id_of(n));
  return out;
}

}  // namespace

std::vector<NodeId> Graph::inputs() const { return ids_with_op(*this, Op::Input); }
std::vector<NodeId> Graph::params() const { return ids_with_op(*this, Op::Param); }

const Node* Graph::return_node() const {
  for (const Node& n : nodes)
    if (n.op == Op::Return) return &n;
  return nullptr;
}

std::vector<NodeId> Graph::outputs() const {
  const Node* r = return_node();
  return r ? r->operands : std::vector<NodeId>{};
}

std::vector<std::vector<NodeId>> Graph::users() const {
  std::vector<std::vector<NodeId>> u(nodes.size());
  for (const Node& n : nodes)
    for (NodeId o : n.operands) u[o.index].push_back(id_of(n));
  return u;
}

size_t Graph::deep_size() const {
  size_t n = nodes.size();
  for (const Node& node : nodes)
    if (node.body) n += node.body->deep_size();
  return n;
}

}  // namespace mlpc::ir
