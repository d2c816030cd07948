#include "passes/fuse_mlp.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <memory>
#include <set>

#include "passes/fused_region.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

// Why `next`'s layer does not join the chain ending at `last` (whose x is the chain's `x`), or
// "" when it does. `users` are last's readers.
std::string why_not_next(const ir::Graph& g, const ir::Node& last, ir::NodeId x,
                         const std::vector<ir::NodeId>& users) {
  if (last.epilogue.residual) return fmt::format("%{} adds a residual", last.name);
  if (users.empty()) return fmt::format("%{} is not read", last.name);
  const ir::Node& user = g.node(users.front());
  if (user.op == ir::Op::Return) return fmt::format("%{} is a graph output", last.name);
  if (users.size() > 1)
    return fmt::format("%{} has {} readers: a hidden layer must feed only the next", last.name,
                       users.size());
  if (user.op != ir::Op::MatMul || !(user.operands[0] == g.id_of(last)))
    return fmt::format("%{} is read by %{} ({}), not as a matmul's x", last.name, user.name,
                       user.op == ir::Op::MatMul ? "as its weight" : ir::op_name(user.op));
  if (user.type.dtype != last.type.dtype)
    return fmt::format("%{} is {}, %{} {}", user.name, ir::dtype_name(user.type.dtype), last.name,
                       ir::dtype_name(last.type.dtype));
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
    MlpChain c{{g.id_of(n)}, {}};
    while (true) {
      const ir::Node& last = g.node(c.layers.back());
      const std::vector<ir::NodeId>& readers = users[c.layers.back().index];
      c.stop = why_not_next(g, last, x, readers);
      if (!c.stop.empty()) break;
      c.layers.push_back(readers.front());
    }
    for (ir::NodeId l : c.layers) taken.insert(l.index);
    if (c.layers.size() >= 2) chains.push_back(std::move(c));
  }
  return chains;
}

std::string fused_mlp_symbol(const ir::Graph& g, const std::vector<ir::NodeId>& layers) {
  std::string base = "mlpc_fused_mlp_";
  for (char ch : g.node(layers.back()).name)
    base += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  std::set<std::string> symbols;
  for (const ir::Node& n : g.nodes)
    if (ir::is_fused(n.op)) symbols.insert(n.symbol);
  std::string symbol = base;
  for (int i = 2; symbols.count(symbol); ++i) symbol = fmt::format("{}_{}", base, i);
  return symbol;
}

bool fuse_mlp(ir::Graph& g) {
  // Runs of chosen layers: root (last layer) -> members.
  std::map<uint32_t, std::set<uint32_t>> regions;
  std::set<uint32_t> moved;
  for (const MlpChain& c : find_mlp_chains(g)) {
    std::vector<ir::NodeId> run;
    auto close = [&] {
      if (run.size() >= 2) {
        std::set<uint32_t>& m = regions[run.back().index];
        for (ir::NodeId l : run) m.insert(l.index), moved.insert(l.index);
      }
      run.clear();
    };
    for (ir::NodeId l : c.layers) {
      if (g.node(l).impl == ir::Impl::FusedMlp) run.push_back(l);
      else close();
    }
    close();
  }
  if (regions.empty()) return false;
  Rebuild r(g);
  for (const ir::Node& n : g.nodes) {
    const uint32_t i = g.id_of(n).index;
    if (auto it = regions.find(i); it != regions.end()) {
      std::vector<ir::NodeId> layers;
      for (uint32_t m : it->second) layers.push_back(ir::NodeId{m});
      ir::Node region = make_fused_region(g, ir::Op::FusedMlp, it->second, i,
                                          fused_mlp_symbol(g, layers), r);
      // The region says how it runs; its layers need not.
      ir::Graph body = *region.body;
      for (ir::Node& b : body.nodes) b.impl = ir::Impl::Auto;
      region.body = std::make_shared<const ir::Graph>(std::move(body));
      region.impl = ir::Impl::FusedMlp;
      r.replace(g.id_of(n), std::move(region));
    } else if (!moved.count(i)) {
      r.copy(n);
    }
  }
  g = r.finish();
  return true;
}

}  // namespace mlpc::passes
