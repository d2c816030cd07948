#include "ir/builder.h"

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/infer.h"

namespace mlpc::ir {

Builder::Builder(std::string graph_name, std::string batch_symbol) {
  g_.name = std::move(graph_name);
  g_.batch_symbol = std::move(batch_symbol);
}

std::string Builder::unique_name(std::string_view hint) {
  std::string base(hint);
  if (base.empty()) {
    while (names_.count(std::to_string(next_auto_))) ++next_auto_;
    return std::to_string(next_auto_++);
  }
  if (!names_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = fmt::format("{}.{}", base, i);
    if (!names_.count(n)) return n;
  }
}

NodeId Builder::add(Node node) {
  std::vector<TensorType> in;
  for (NodeId o : node.operands) {
    MLPC_ASSERT(o.index < g_.nodes.size(), "operand defined after its use");
    in.push_back(g_.node(o).type);
  }
  Inferred r = infer_type(node.op, in, node.type, node.body.get(), node.epilogue);
  if (!r.error.empty()) {
    std::string operands;
    for (NodeId o : node.operands)
      operands += fmt::format("{}%{}: {}", operands.empty() ? "" : ", ", g_.node(o).name,
                              to_string(g_.node(o).type, g_.batch_symbol));
    throw Error(fmt::format("node %{} ({}{}{}): {}", node.name.empty() ? "?" : node.name,
                            op_name(node.op), operands.empty() ? "" : " ", operands, r.error));
  }
  node.type = r.type;
  if (node.op == Op::Return) {
    node.name.clear();
  } else {
    node.name = node.name.empty() ? unique_name("") : node.name;
    if (names_.count(node.name)) throw Error(fmt::format("value %{} is defined twice", node.name));
    names_.insert(node.name);
  }
  g_.nodes.push_back(std::move(node));
  return NodeId{static_cast<uint32_t>(g_.nodes.size() - 1)};
}

NodeId Builder::input(std::string name, TensorType type) {
  return add(Node{.op = Op::Input, .name = std::move(name), .type = std::move(type)});
}

NodeId Builder::param(std::string name, TensorType type) {
  return add(Node{.op = Op::Param, .name = std::move(name), .type = std::move(type)});
}

NodeId Builder::op(Op op, std::vector<NodeId> operands, std::string name, double scalar) {
  MLPC_ASSERT(op != Op::Input && op != Op::Param && op != Op::Cast, "use input/param/cast");
  return add(Node{.op = op, .name = std::move(name), .operands = std::move(operands),
                  .scalar = scalar});
}

NodeId Builder::cast(NodeId x, DType to, std::string name) {
  return add(Node{.op = Op::Cast, .name = std::move(name), .type = {to, {}}, .operands = {x}});
}

NodeId Builder::matmul(NodeId x, NodeId w, GemmEpilogue e, std::vector<NodeId> extra,
                       std::string name) {
  std::vector<NodeId> operands{x, w};
  operands.insert(operands.end(), extra.begin(), extra.end());
  return add(Node{.op = Op::MatMul, .name = std::move(name), .operands = std::move(operands),
                  .epilogue = e});
}

void Builder::ret(std::vector<NodeId> outputs) {
  add(Node{.op = Op::Return, .operands = std::move(outputs)});
}

void Builder::rename(NodeId id, std::string name) {
  Node& n = g_.node(id);
  if (n.name == name) return;
  if (name.empty() || names_.count(name))
    throw Error(fmt::format("cannot rename %{} to %{}: name {}", n.name, name,
                            name.empty() ? "is empty" : "is taken"));
  names_.erase(n.name);
  names_.insert(name);
  n.name = std::move(name);
}

Graph Builder::finish() {
  MLPC_ASSERT(g_.return_node() != nullptr, "graph finished without a return");
  names_.clear();
  return std::move(g_);
}

}  // namespace mlpc::ir
