#include "passes/fuse_mlp.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>

#include "ir/builder.h"
#include "ir/identifier.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

// A layer of matmul `m` alone.
MlpLayer layer_of(const ir::Graph& g, const ir::Node& m) {
  MlpLayer l{g.id_of(m), g.id_of(m), m.epilogue, std::nullopt};
  if (m.epilogue.bias) l.bias = m.operands[2];
  return l;
}

// Extends `layer` (a matmul alone) by `p` when p is the rest of its epilogue: a fused.pointwise
// region of the matmul's type reading it (and at most a bias param [N]) that adds the bias
// and/or applies one GEMM activation, neither of which the matmul already has.
bool take_tail(const ir::Graph& g, const ir::Node& p, MlpLayer& layer) {
  const ir::Node& m = g.node(layer.matmul);
  if (p.op != ir::Op::FusedPointwise || !p.body || m.epilogue.residual || !(p.type == m.type))
    return false;
  const ir::Graph& body = *p.body;
  const std::vector<ir::NodeId> ins = body.inputs();
  std::optional<ir::NodeId> at, bias;  // the body's m, and its bias input
  std::optional<ir::NodeId> bias_outer;
  for (size_t i = 0; i < ins.size(); ++i) {
    const ir::Node& outer = g.node(p.operands[i]);
    if (p.operands[i] == layer.matmul) {
      at = ins[i];
    } else if (outer.op == ir::Op::Param && outer.type.shape.rank() == 1 && !bias) {
      bias = ins[i];
      bias_outer = p.operands[i];
    } else {
      return false;
    }
  }
  if (!at) return false;
  ir::GemmEpilogue e = m.epilogue;
  for (const ir::Node& n : body.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Return) continue;
    const bool adds_bias = n.op == ir::Op::Add && bias && !e.bias && !e.act &&
                           ((n.operands[0] == *at && n.operands[1] == *bias) ||
                            (n.operands[1] == *at && n.operands[0] == *bias));
    const bool activates = ir::is_gemm_activation(n.op) && !e.act && n.operands[0] == *at;
    if (adds_bias) e.bias = true;
    else if (activates) e.act = n.op;
    else return false;
    at = body.id_of(n);
  }
  if (!(body.outputs().front() == *at) || (bias && !e.bias)) return false;
  layer.epilogue = e;
  layer.output = g.id_of(p);
  if (bias_outer) layer.bias = bias_outer;
  return true;
}

// Why matmul `next` does not join the chain whose last layer is `last` (the chain's x: `x`), or
// "" when it does. `users` are the readers of last's output.
std::string why_not_next(const ir::Graph& g, const MlpLayer& last, ir::NodeId x,
                         const std::vector<ir::NodeId>& users) {
  const ir::Node& out = g.node(last.output);
  if (last.epilogue.residual) return fmt::format("%{} adds a residual", out.name);
  if (users.empty()) return fmt::format("%{} is not read", out.name);
  const ir::Node& user = g.node(users.front());
  if (user.op == ir::Op::Return) return fmt::format("%{} is a graph output", out.name);
  if (users.size() > 1)
    return fmt::format("%{} has {} readers: a hidden layer must feed only the next", out.name,
                       users.size());
  if (user.op != ir::Op::MatMul || !(user.operands[0] == last.output))
    return fmt::format("%{} is read by %{} ({}), not as a matmul's x", out.name, user.name,
                       user.op == ir::Op::MatMul ? "as its weight" : ir::op_name(user.op));
  if (user.type.dtype != out.type.dtype)
    return fmt::format("%{} is {}, %{} {}", user.name, ir::dtype_name(user.type.dtype), out.name,
                       ir::dtype_name(out.type.dtype));
  if (user.epilogue.residual && !(user.operands.back() == x))
    return fmt::format("%{} adds %{}, not the chain's x", user.name,
                       g.node(user.operands.back()).name);
  return {};
}

}  // namespace

std::vector<MlpChain> find_mlp_chains(const ir::Graph& g) {
  const auto users = g.users();
  std::vector<MlpChain> chains;
  std::set<uint32_t> taken;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::MatMul || taken.count(g.id_of(n).index)) continue;
    const ir::NodeId x = n.operands[0];
    MlpChain c;
    const ir::Node* m = &n;
    while (true) {
      MlpLayer layer = layer_of(g, *m);
      const std::vector<ir::NodeId>& readers = users[layer.matmul.index];
      if (readers.size() == 1) take_tail(g, g.node(readers.front()), layer);
      c.layers.push_back(layer);
      taken.insert(layer.matmul.index);
      const std::vector<ir::NodeId>& next = users[layer.output.index];
      c.stop = why_not_next(g, layer, x, next);
      if (!c.stop.empty()) break;
      m = &g.node(next.front());
    }
    if (c.layers.size() >= 2) chains.push_back(std::move(c));
  }
  return chains;
}

std::vector<MlpLayer> plain_layers(const ir::Graph& g, const std::vector<ir::NodeId>& matmuls) {
  std::vector<MlpLayer> layers;
  for (ir::NodeId id : matmuls) layers.push_back(layer_of(g, g.node(id)));
  return layers;
}

std::string fused_mlp_symbol(const ir::Graph& g, const std::vector<MlpLayer>& layers) {
  const std::string base =
      "mlpc_fused_mlp_" + ir::c_identifier_chars(g.node(layers.back().output).name);
  std::set<std::string> symbols;
  for (const ir::Node& n : g.nodes)
    if (ir::is_fused(n.op)) symbols.insert(n.symbol);
  std::string symbol = base;
  for (int i = 2; symbols.count(symbol); ++i) symbol = fmt::format("{}_{}", base, i);
  return symbol;
}

namespace {

// The fused.mlp region of `layers` (operands in `outer`'s ids): x, then each layer's weight and
// bias as body inputs; each layer one matmul named as its output, with its whole epilogue.
ir::Node make_region(const ir::Graph& g, const std::vector<MlpLayer>& layers,
                     const Rebuild& outer) {
  const std::string symbol = fused_mlp_symbol(g, layers);
  ir::Builder body(symbol, g.batch_symbol);
  std::vector<ir::NodeId> operands;
  std::map<uint32_t, ir::NodeId> inside;  // a value read twice (a tied weight) is one input
  auto input = [&](ir::NodeId id) {
    auto [it, fresh] = inside.try_emplace(id.index);
    if (fresh) {
      operands.push_back(outer.mapped(id));
      it->second = body.input(g.node(id).name, g.node(id).type);
    }
    return it->second;
  };
  // Inputs first (a region's inputs are its arguments), in kernel parameter order.
  ir::NodeId h = input(g.node(layers.front().matmul).operands[0]);
  const ir::NodeId x_in = h;
  for (const MlpLayer& l : layers) {
    input(g.node(l.matmul).operands[1]);
    if (l.bias) input(*l.bias);
  }
  for (const MlpLayer& l : layers) {
    const ir::NodeId w = input(g.node(l.matmul).operands[1]);
    std::vector<ir::NodeId> extra;
    if (l.bias) extra.push_back(input(*l.bias));
    if (l.epilogue.residual) extra.push_back(x_in);  // the chain's x: find_mlp_chains' rule
    h = body.matmul(h, w, l.epilogue, extra, g.node(l.output).name);
  }
  body.ret({h});
  ir::Node region;
  region.op = ir::Op::FusedMlp;
  region.name = g.node(layers.back().output).name;
  region.symbol = symbol;
  region.loc = g.node(layers.back().output).loc;
  region.body = std::make_shared<const ir::Graph>(body.finish());
  region.operands = std::move(operands);
  region.impl = ir::Impl::FusedMlp;
  return region;
}

}  // namespace

bool fuse_mlp(ir::Graph& g) {
  std::map<uint32_t, std::vector<MlpLayer>> regions;  // by the last output's index
  std::set<uint32_t> moved;
  for (const MlpChain& c : find_mlp_chains(g)) {
    std::vector<MlpLayer> run;
    auto close = [&] {
      if (run.size() >= 2) {
        for (const MlpLayer& l : run) moved.insert(l.matmul.index), moved.insert(l.output.index);
        regions[run.back().output.index] = run;
      }
      run.clear();
    };
    for (const MlpLayer& l : c.layers) {
      if (g.node(l.matmul).impl == ir::Impl::FusedMlp) run.push_back(l);
      else close();
    }
    close();
  }
  if (regions.empty()) return false;
  Rebuild r(g);
  for (const ir::Node& n : g.nodes) {
    const uint32_t i = g.id_of(n).index;
    if (auto it = regions.find(i); it != regions.end())
      r.replace(g.id_of(n), make_region(g, it->second, r));
    else if (!moved.count(i))
      r.copy(n);
  }
  g = r.finish();
  return true;
}

}  // namespace mlpc::passes
