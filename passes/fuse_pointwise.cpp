#include "passes/fuse_pointwise.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <set>

#include "passes/fused_region.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;

struct Group {
  uint32_t root = 0;
  std::set<uint32_t> members;     // nodes that move into the region (root included)
  std::set<uint32_t> recomputed;  // nodes copied into the region; the original stays
};

std::string describe_users(const std::vector<NodeId>& users) {
  return fmt::format("{} user{}", users.size(), users.size() == 1 ? "" : "s");
}

// Recomputing `p` inside a group loads p's operands instead of p itself. That costs no extra
// bytes when p reads at most one full-size tensor (row vectors are noise), and is only sound when
// every operand is stored in memory for sure (not itself a pointwise value that may be fused).
bool cheap_to_recompute(const Graph& g, const Node& p) {
  int full = 0;
  for (NodeId o : p.operands) {
    const Node& src = g.node(o);
    if (ir::is_pointwise(src.op)) return false;
    if (src.type.shape == p.type.shape) ++full;
  }
  return full <= 1;
}

class Grouper {
 public:
  explicit Grouper(const Graph& g)
      : g_(g), users_(g.users()), group_of_(g.size(), -1), recomputed_in_(g.size()),
        dropped_(g.size(), false) {}

  std::vector<Group> run() {
    for (size_t i = g_.size(); i-- > 0;) {
      if (!ir::is_pointwise(g_.nodes[i].op) || group_of_[i] != -1) continue;
      if (recomputed_by_every_user(static_cast<uint32_t>(i))) {
        dropped_[i] = true;  // nothing reads the stored value: no kernel for it
        continue;
      }
      grow(static_cast<uint32_t>(i));
    }
    std::reverse(groups_.begin(), groups_.end());  // program order of roots
    return std::move(groups_);
  }

 private:
  // Grows the group rooted at `root` through its producers, latest first: when a producer is
  // considered, every user of it that could join the group has been decided already.
  void grow(uint32_t root) {
    Group grp{root, {root}, {}};
    const ir::Shape& space = g_.nodes[root].type.shape;
    group_of_[root] = static_cast<int>(groups_.size());
    walk_producers(g_, root, [&](uint32_t p, uint32_t consumer) {
      const Node& pn = g_.nodes[p];
      auto decide = [&](Verdict v, std::string reason) {
        pending_.push_back({"", pn.name, g_.nodes[consumer].name, v, std::move(reason)});
      };
      switch (ir::op_kind(pn.op)) {
        case ir::OpKind::Source: return false;  // a kernel argument, read from memory
        case ir::OpKind::Gemm:
          decide(Verdict::Rejected, "producer is a matmul: fusion never crosses a GEMM");
          return false;
        case ir::OpKind::Pointwise: break;
        case ir::OpKind::Reduction:
          decide(Verdict::Rejected, "producer is a row reduction, not pointwise: fuse-reduction "
                                    "gives it a row kernel");
          return false;
        default: decide(Verdict::Rejected, "producer is already a kernel"); return false;
      }
      if (group_of_[p] != -1) return false;
      if (grp.members.size() + grp.recomputed.size() >= kMaxRegionOps) {
        decide(Verdict::Rejected,
               fmt::format("the region holds {} ops, the most one kernel takes (NVRTC's time "
                           "grows faster than a kernel's size): the producer starts another",
                           kMaxRegionOps));
        return false;
      }
      if (g_.nodes[consumer].op == ir::Op::Slice) {
        // Even at full width (offset 0: an identity): the kernel reads a slice's columns from
        // memory with strided loads (codegen/pointwise_kernel.cpp). Fusing it was an internal
        // error the pipeline fuzzer found.
        decide(Verdict::Rejected, "a slice reads its operand from memory");
        return false;
      }
      if (!(pn.type.shape == space)) {
        decide(Verdict::Rejected,
               fmt::format("producer iterates over {}, the group over {}",
                           ir::to_string(pn.type.shape, g_.batch_symbol),
                           ir::to_string(space, g_.batch_symbol)));
        return false;
      }
      const std::vector<NodeId>& users = users_[p];
      bool all_inside = std::all_of(users.begin(), users.end(),
                                    [&](NodeId u) { return grp.members.count(u.index) > 0; });
      if (all_inside) {
        grp.members.insert(p);
        group_of_[p] = group_of_[root];
        decide(Verdict::Fused, users.size() == 1 ? "single user"
                                                 : fmt::format("all {} users in the group",
                                                               users.size()));
        return true;
      }
      auto outside = std::find_if(users.begin(), users.end(), [&](NodeId u) {
        return !grp.members.count(u.index);
      });
      const Node& other = g_.node(*outside);
      if (!ir::is_pointwise(other.op)) {
        decide(Verdict::Rejected,
               fmt::format("producer has {}, also read by %{} ({}): materialized",
                           describe_users(users), other.name, ir::op_name(other.op)));
      } else if (cheap_to_recompute(g_, pn)) {
        grp.recomputed.insert(p);
        recomputed_in_[p].insert(group_of_[root]);
        decide(Verdict::Recomputed,
               fmt::format("producer has {}; recomputing it loads no more than reading it",
                           describe_users(users)));
      } else {
        decide(Verdict::Rejected,
               fmt::format("producer has {} and recomputing it would load more: materialized",
                           describe_users(users)));
      }
      return false;
    });
    groups_.push_back(std::move(grp));
    decisions_of_group_.push_back(std::move(pending_));
    pending_.clear();
  }

 public:
  // Decisions per group, in the order groups_ had before the reverse in run().
  std::vector<std::vector<FusionDecision>> decisions_of_group_;
  const std::vector<bool>& dropped() const { return dropped_; }

 private:
  bool recomputed_by_every_user(uint32_t p) const {
    if (recomputed_in_[p].empty()) return false;
    for (NodeId u : users_[p])
      if (group_of_[u.index] == -1 || !recomputed_in_[p].count(group_of_[u.index])) return false;
    return true;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> users_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
  std::vector<FusionDecision> pending_;
  std::vector<std::set<int>> recomputed_in_;  // per node: groups that recompute it
  std::vector<bool> dropped_;                  // per node: recomputed everywhere, never stored
};

std::string kernel_symbol(const Graph& g, const Group& grp, int index) {
  std::vector<std::string> ops;
  std::set<uint32_t> all = grp.members;
  all.insert(grp.recomputed.begin(), grp.recomputed.end());
  for (uint32_t i : all) {
    std::string name(ir::op_name(g.nodes[i].op));
    if (std::find(ops.begin(), ops.end(), name) == ops.end()) ops.push_back(name);
  }
  if (ops.size() > 4) ops.resize(4);  // a readable name, not a full listing
  return all.size() == 1 ? fmt::format("mlpc_{}_{}", ops[0], index)
                         : fmt::format("mlpc_fused_{}_{}", fmt::join(ops, "_"), index);
}

// The region of one group, the values it recomputes included (passes/fused_region.h).
Node make_fused_node(const Graph& g, const Group& grp, const std::string& symbol,
                     const Rebuild& outer) {
  std::set<uint32_t> inside = grp.members;
  inside.insert(grp.recomputed.begin(), grp.recomputed.end());
  return make_fused_region(g, ir::Op::FusedPointwise, inside, grp.root, symbol, outer);
}

// Replaces each group by one fused.pointwise node at its root's position.
// Nodes in `dropped` disappear.
void emit_groups(Graph& g, const std::vector<Group>& groups, std::vector<bool> dropped,
                 std::vector<std::vector<FusionDecision>>* decisions, FusionReport* report) {
  std::vector<int> group_at_root(g.size(), -1);
  std::vector<bool>& moved = dropped;
  for (size_t k = 0; k < groups.size(); ++k) {
    group_at_root[groups[k].root] = static_cast<int>(k);
    for (uint32_t m : groups[k].members) moved[m] = true;
  }
  Rebuild r(g);
  int index = 0;
  for (const Node& n : g.nodes) {
    uint32_t i = g.id_of(n).index;
    if (group_at_root[i] >= 0) {
      const Group& grp = groups[group_at_root[i]];
      std::string symbol = kernel_symbol(g, grp, index++);
      r.replace(g.id_of(n), make_fused_node(g, grp, symbol, r));
      if (decisions && report)
        for (FusionDecision d : (*decisions)[group_at_root[i]]) {
          d.group = symbol;
          report->decisions.push_back(std::move(d));
        }
    } else if (!moved[i]) {
      r.copy(n);
    }
  }
  g = r.finish();
}

}  // namespace

bool fuse_pointwise(Graph& g, FusionReport* report) {
  Grouper grouper(g);
  std::vector<Group> groups = grouper.run();
  if (groups.empty()) return false;
  std::vector<std::vector<FusionDecision>> decisions = std::move(grouper.decisions_of_group_);
  std::reverse(decisions.begin(), decisions.end());
  emit_groups(g, groups, grouper.dropped(), &decisions, report);
  return true;
}

bool isolate_pointwise(Graph& g) {
  std::vector<Group> groups;
  for (const Node& n : g.nodes)
    if (ir::is_pointwise(n.op)) {
      uint32_t i = g.id_of(n).index;
      groups.push_back(Group{i, {i}, {}});
    }
  if (groups.empty()) return false;
  emit_groups(g, groups, std::vector<bool>(g.size(), false), nullptr, nullptr);
  return true;
}

}  // namespace mlpc::passes
