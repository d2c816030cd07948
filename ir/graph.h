// The IR graph: a function whose nodes are kept in program (topological) order and refer to each
// other by small typed ids (style.md #5). Every node but `return` defines one value, named by the
// node. A fused.pointwise node owns a body: a small graph whose inputs are the fused node's
// operands, in order, and whose return yields the fused value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/impl.h"
#include "ir/op.h"
#include "ir/type.h"

namespace mlpc::ir {

struct NodeId {
  uint32_t index = 0;
  bool operator==(const NodeId&) const = default;
  auto operator<=>(const NodeId&) const = default;
};

// Where a node came from in .mlp text (line 0: built by the C++ API).
struct SourceLoc {
  int line = 0;
  int col = 0;
};

class Graph;

// What a matmul applies to its product before the store (ops.def):
//   y = act(x . W^T + bias) + residual
// with the bias a row vector [N] (operand 2 when present) and the residual [.., N] like y (the
// last operand when present). Every other op has the plain (default) one.
struct GemmEpilogue {
  bool bias = false;
  bool residual = false;
  std::optional<Op> act;  // one of is_gemm_activation's ops
  bool plain() const { return !bias && !residual && !act; }
  bool operator==(const GemmEpilogue&) const = default;
};

// The unary pointwise ops a matmul's epilogue may apply: relu, gelu, gelu_tanh, silu, sigmoid,
// tanh.
bool is_gemm_activation(Op op);
// The formula `e` computes, e.g. "relu(x.W^T + bias) + residual", for reports and logs.
std::string epilogue_formula(const GemmEpilogue& e);

struct Node {
  Op op = Op::Input;
  std::string name;  // SSA name without '%'; unique within its graph
  TensorType type;   // the result type (unused for return)
  std::vector<NodeId> operands;
  double scalar = 0.0;                // scale: the factor
  std::string symbol;                 // fused.pointwise: the kernel name
  std::shared_ptr<const Graph> body;  // fused.pointwise: the region
  GemmEpilogue epilogue;              // matmul: what it applies before the store
  Impl impl = Impl::Auto;             // matmul, fused.pointwise: how it runs (ir/impl.h)
  SourceLoc loc;
};

class Graph {
 public:
  std::string name = "main";
  std::string batch_symbol = "M";  // how the symbolic batch dim is spelled
  std::vector<Node> nodes;

  const Node& node(NodeId id) const { return nodes[id.index]; }
  Node& node(NodeId id) { return nodes[id.index]; }
  NodeId id_of(const Node& n) const { return NodeId{static_cast<uint32_t>(&n - nodes.data())}; }
  size_t size() const { return nodes.size(); }

  std::vector<NodeId> inputs() const;   // in argument order
  std::vector<NodeId> params() const;
  std::vector<NodeId> outputs() const;  // the operands of the return node
  const Node* return_node() const;

  // users[i] lists the nodes that read node i (once per operand slot).
  std::vector<std::vector<NodeId>> users() const;
  // Total node count, regions included; bounds pathological inputs.
  size_t deep_size() const;
};

}  // namespace mlpc::ir
