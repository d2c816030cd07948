#include "ir/mlp_chain.h"

#include <fmt/format.h>

namespace mlpc::ir {

std::vector<NodeId> mlp_chain_layers(const Graph& body, std::string* why_not) {
  auto refuse = [&](std::string why) {
    if (why_not) *why_not = std::move(why);
    return std::vector<NodeId>{};
  };
  const std::vector<NodeId> inputs = body.inputs();
  if (inputs.empty()) return refuse("a fused.mlp region reads x first");
  const NodeId x = inputs.front();
  auto is_side_input = [&](NodeId id) { return body.node(id).op == Op::Input && !(id == x); };
  const auto users = body.users();
  std::vector<NodeId> layers;
  for (const Node& n : body.nodes) {
    if (n.op == Op::Input || n.op == Op::Return) continue;
    if (n.op != Op::MatMul)
      return refuse(fmt::format("%{} is a {}: a fused.mlp region holds matmuls only", n.name,
                                op_name(n.op)));
    const NodeId in = layers.empty() ? x : layers.back();
    if (!(n.operands[0] == in))
      return refuse(fmt::format("%{} reads %{}, not %{}: a fused.mlp region is a chain", n.name,
                                body.node(n.operands[0]).name, body.node(in).name));
    const size_t side = n.operands.size() - (n.epilogue.residual ? 1 : 0);
    for (size_t k = 1; k < side; ++k)
      if (!is_side_input(n.operands[k]))
        return refuse(fmt::format("%{}'s weight and bias must be region operands other than x",
                                  n.name));
    if (n.epilogue.residual && !(n.operands.back() == x))
      return refuse(fmt::format("%{}'s residual is %{}: a fused.mlp region adds only x", n.name,
                                body.node(n.operands.back()).name));
    if (!layers.empty() && body.node(layers.back()).epilogue.residual)
      return refuse(fmt::format("%{} has a residual but is not the last layer",
                                body.node(layers.back()).name));
    if (n.type.dtype != body.node(x).type.dtype)
      return refuse(fmt::format("%{} is {}, x {}: a fused.mlp region has one dtype", n.name,
                                dtype_name(n.type.dtype), dtype_name(body.node(x).type.dtype)));
    layers.push_back(body.id_of(n));
  }
  if (layers.empty()) return refuse("a fused.mlp region has no matmul");
  for (size_t i = 0; i + 1 < layers.size(); ++i)
    if (users[layers[i].index].size() != 1)
      return refuse(fmt::format("%{} is read {} times: a hidden layer feeds only the next",
                                body.node(layers[i]).name, users[layers[i].index].size()));
  const std::vector<NodeId> outs = body.outputs();
  if (outs.size() != 1 || !(outs[0] == layers.back()))
    return refuse("a fused.mlp region returns its last matmul");
  return layers;
}

}  // namespace mlpc::ir
