// Builds a verified-as-you-go graph: every op's type is inferred when it is added, and a bad
// combination throws mlpc::Error naming the op and its operands.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace mlpc::ir {

class Builder {
 public:
  explicit Builder(std::string graph_name = "main", std::string batch_symbol = "M");

  NodeId input(std::string name, TensorType type);
  NodeId param(std::string name, TensorType type);
  // A pointwise or gemm op. An empty name picks a fresh numeric one.
  NodeId op(Op op, std::vector<NodeId> operands, std::string name = {}, double scalar = 0.0);
  NodeId cast(NodeId x, DType to, std::string name = {});
  // x . W^T with epilogue `e`: `extra` holds its bias and then its residual, where it has them.
  NodeId matmul(NodeId x, NodeId w, GemmEpilogue e = {}, std::vector<NodeId> extra = {},
                std::string name = {});
  // Adds a node as given (used by passes that copy nodes); its type is re-inferred and checked.
  NodeId add(Node node);
  void ret(std::vector<NodeId> outputs);
  // Gives node `id` a new name (throws mlpc::Error when it is taken).
  void rename(NodeId id, std::string name);

  const TensorType& type(NodeId id) const { return g_.node(id).type; }
  const Graph& graph() const { return g_; }
  Graph finish();

  // A name not used yet: `hint` itself if free, else hint.1, hint.2, ...
  std::string unique_name(std::string_view hint);

 private:
  Graph g_;
  std::unordered_set<std::string> names_;
  int next_auto_ = 0;
};

}  // namespace mlpc::ir
