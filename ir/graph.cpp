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

bool is_gemm_activation(Op op) {
  switch (op) {
    case Op::Relu:
    case Op::Gelu:
    case Op::GeluTanh:
    case Op::Silu:
    case Op::Sigmoid:
    case Op::Tanh: return true;
    default: return false;
  }
}

std::string epilogue_formula(const GemmEpilogue& e) {
  std::string s = e.bias ? "x.W^T + bias" : "x.W^T";
  if (e.act) s = std::string(op_name(*e.act)) + "(" + s + ")";
  if (e.residual) s += " + residual";
  return s;
}

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
