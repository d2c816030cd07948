#include "passes/fuse_reduction.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include "ir/row_space.h"
#include "passes/fused_region.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;

struct Group {
  uint32_t root = 0;
  std::set<uint32_t> members;  // program order
  std::vector<FusionDecision> decisions;
};

bool row_op(ir::Op op) { return ir::is_pointwise(op) || ir::is_reduction(op); }

// The rows a growing group iterates over: leading dims fixed by the root, the row length by the
// first full row seen (a reduction's operand or a value whose last dim is not 1).
class Rows {
 public:
  explicit Rows(const ir::Shape& root) : lead_(root.dims.begin(), root.dims.end() - 1) {
    if (root.last() != 1) n_ = root.last();
  }
  // Whether a value of shape `s` lies in these rows: a full row, a per-row value [.., 1] or a
  // row vector [N] (a weight cast to f32); fixes N when it is first seen.
  bool admit(const ir::Shape& s, bool must_be_full) {
    bool row_vector = s.rank() == 1 && !lead_.empty();
    if (row_vector && must_be_full) return false;
    if (!row_vector && (s.rank() != static_cast<int>(lead_.size()) + 1 ||
                        !std::equal(lead_.begin(), lead_.end(), s.dims.begin())))
      return false;
    if (!row_vector && s.last() == 1 && !must_be_full) return true;
    if (n_ && *n_ != s.last()) return false;
    n_ = s.last();
    return true;
  }
  std::string str(const std::string& bs) const {
    ir::Shape s{lead_};
    s.dims.push_back(n_.value_or(1));
    return ir::to_string(s, bs);
  }

 private:
  std::vector<int64_t> lead_;
  std::optional<int64_t> n_;
};

class Grouper {
 public:
  explicit Grouper(const Graph& g) : g_(g), users_(g.users()), taken_(g.size(), false) {}

  std::vector<Group> run() {
    std::vector<Group> kept;
    for (size_t i = g_.size(); i-- > 0;) {
      if (taken_[i] || !row_op(g_.nodes[i].op) || g_.nodes[i].op == ir::Op::Slice) continue;
      Group grp = grow(static_cast<uint32_t>(i));
      // Every member is done either way: none can join a group rooted earlier (see below).
      for (uint32_t m : grp.members) taken_[m] = true;
      if (worth_a_row_kernel(grp)) kept.push_back(std::move(grp));
    }
    std::reverse(kept.begin(), kept.end());
    return kept;
  }

 private:
  // A member reaches the root through users inside the group, and the root comes after every
  // earlier root: so a node of a discarded group can never have all its users in a later group.
  bool worth_a_row_kernel(const Group& grp) const {
    for (uint32_t m : grp.members)
      if (ir::is_reduction(g_.nodes[m].op) || broadcasts_per_row(g_, g_.nodes[m])) return true;
    return false;
  }

  Group grow(uint32_t root) {
    Group grp{root, {root}, {}};
    Rows rows(g_.nodes[root].type.shape);
    auto admit_node = [&](const Node& n) {
      if (n.op == ir::Op::Slice) return false;  // reads another row layout: fuse-pointwise's
      bool ok = rows.admit(n.type.shape, false);
      if (ok && ir::is_reduction(n.op))
        ok = rows.admit(g_.node(n.operands[0]).type.shape, true);
      return ok;
    };
    if (!admit_node(g_.nodes[root])) return grp;  // e.g. a reduction over a 1-d tensor's rows
    walk_producers(g_, root, [&](uint32_t p, uint32_t consumer) {
      const Node& pn = g_.nodes[p];
      auto decide = [&](Verdict v, std::string reason) {
        grp.decisions.push_back({"", pn.name, g_.nodes[consumer].name, v, std::move(reason)});
      };
      switch (ir::op_kind(pn.op)) {
        case ir::OpKind::Source: return false;  // a kernel argument
        case ir::OpKind::Gemm:
          decide(Verdict::Rejected, "producer is a matmul: fusion never crosses a GEMM");
          return false;
        case ir::OpKind::Pointwise:
        case ir::OpKind::Reduction: break;
        default: decide(Verdict::Rejected, "producer is already a kernel"); return false;
      }
      if (taken_[p]) return false;
      if (!admit_node(pn)) {
        decide(Verdict::Rejected,
               fmt::format("producer {} is not in the group's rows {}",
                           ir::to_string(pn.type.shape, g_.batch_symbol),
                           rows.str(g_.batch_symbol)));
        return false;
      }
      const std::vector<NodeId>& users = users_[p];
      auto outside = std::find_if(users.begin(), users.end(),
                                  [&](NodeId u) { return !grp.members.count(u.index); });
      if (outside != users.end()) {
        const Node& other = g_.node(*outside);
        std::string reader = other.op == ir::Op::Return
                                 ? std::string("the return")
                                 : fmt::format("%{} ({})", other.name, ir::op_name(other.op));
        decide(Verdict::Rejected,
               fmt::format("producer has {} user{}, also read by {}: materialized", users.size(),
                           users.size() == 1 ? "" : "s", reader));
        return false;
      }
      grp.members.insert(p);
      decide(Verdict::Fused, ir::is_reduction(pn.op) ? "a reduction over the same rows"
                             : users.size() == 1     ? "single user"
                                                 : fmt::format("all {} users in the group",
                                                               users.size()));
      return true;
    });
    return grp;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> users_;
  std::vector<bool> taken_;
};

std::string kernel_symbol(const Graph& g, const Group& grp, int index) {
  std::vector<std::string> ops;
  for (uint32_t i : grp.members)
    if (ir::is_reduction(g.nodes[i].op) || grp.members.size() == 1) {
      std::string name(ir::op_name(g.nodes[i].op));
      if (std::find(ops.begin(), ops.end(), name) == ops.end()) ops.push_back(name);
    }
  if (ops.empty()) ops.push_back("broadcast");  // per-row broadcasts only
  if (ops.size() > 3) ops.resize(3);
  return fmt::format("mlpc_rows_{}_{}", fmt::join(ops, "_"), index);
}

// The region of one group (passes/fused_region.h).
Node make_fused_node(const Graph& g, const Group& grp, const std::string& symbol,
                     const Rebuild& outer) {
  return make_fused_region(g, ir::Op::FusedReduction, grp.members, grp.root, symbol, outer);
}

// Replaces each group by one fused.reduction node at its root's position.
void emit_groups(Graph& g, std::vector<Group>& groups, FusionReport* report) {
  std::vector<int> group_at_root(g.size(), -1);
  std::vector<bool> moved(g.size(), false);
  for (size_t k = 0; k < groups.size(); ++k) {
    group_at_root[groups[k].root] = static_cast<int>(k);
    for (uint32_t m : groups[k].members) moved[m] = true;
  }
  Rebuild r(g);
  int index = 0;
  for (const Node& n : g.nodes) {
    uint32_t i = g.id_of(n).index;
    if (group_at_root[i] >= 0) {
      Group& grp = groups[group_at_root[i]];
      std::string symbol = kernel_symbol(g, grp, index++);
      r.replace(g.id_of(n), make_fused_node(g, grp, symbol, r));
      if (report)
        for (FusionDecision& d : grp.decisions) {
          d.group = symbol;
          report->decisions.push_back(std::move(d));
        }
    } else if (!moved[i]) {
      r.copy(n);
    }
  }
  g = r.finish();
}

// Single-node groups for the reductions and per-row broadcasts not in `groups` yet.
void add_lone_groups(const Graph& g, std::vector<Group>& groups) {
  std::vector<bool> in_group(g.size(), false);
  for (const Group& grp : groups)
    for (uint32_t m : grp.members) in_group[m] = true;
  for (const Node& n : g.nodes) {
    uint32_t i = g.id_of(n).index;
    if (!in_group[i] && (ir::is_reduction(n.op) || broadcasts_per_row(g, n)))
      groups.push_back(Group{i, {i}, {}});
  }
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.root < b.root; });
}

}  // namespace

bool broadcasts_per_row(const Graph& g, const Node& n) {
  if (!ir::is_pointwise(n.op) || n.operands.size() != 2 || n.type.shape.last() == 1) return false;
  for (NodeId o : n.operands) {
    const ir::Shape& s = g.node(o).type.shape;
    if (s.rank() == n.type.shape.rank() && s.last() == 1) return true;
  }
  return false;
}

bool fuse_reduction(Graph& g, FusionReport* report) {
  std::vector<Group> groups = Grouper(g).run();
  // A group that could not take a reduction (a row space it does not fit) still needs a kernel.
  add_lone_groups(g, groups);
  if (groups.empty()) return false;
  emit_groups(g, groups, report);
  return true;
}

bool isolate_reduction(Graph& g) {
  std::vector<Group> groups;
  add_lone_groups(g, groups);
  if (groups.empty()) return false;
  emit_groups(g, groups, nullptr);
  return true;
}

}  // namespace mlpc::passes
