#include "passes/merge_gemms.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>

#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeId;
using ir::Op;

struct Sibling {
  uint32_t gemm = 0, weight = 0;
};

// Sibling groups by shared x: plain matmuls whose weight is a param that no concat stacks yet.
std::vector<std::vector<Sibling>> sibling_groups(const Graph& g) {
  std::set<uint32_t> stacked;
  for (const Node& n : g.nodes)
    if (n.op == Op::Concat)
      for (NodeId o : n.operands) stacked.insert(o.index);
  std::map<uint32_t, std::vector<Sibling>> by_x;
  std::vector<uint32_t> order;  // x values, in order of their first sibling
  for (const Node& n : g.nodes) {
    if (n.op != Op::MatMul || !n.epilogue.plain()) continue;
    const Node& w = g.node(n.operands[1]);
    if (w.op != Op::Param || stacked.count(n.operands[1].index)) continue;
    auto& group = by_x[n.operands[0].index];
    bool same_weight = false;
    for (const Sibling& s : group) same_weight |= s.weight == n.operands[1].index;
    if (same_weight) continue;  // x . W twice is CSE's business, not a merge
    if (group.empty()) order.push_back(n.operands[0].index);
    group.push_back({g.id_of(n).index, n.operands[1].index});
  }
  std::vector<std::vector<Sibling>> out;
  for (uint32_t x : order)
    if (by_x[x].size() >= 2) out.push_back(by_x[x]);
  return out;
}

GemmMergeCandidate describe(const Graph& g, const std::vector<Sibling>& group) {
  GemmMergeCandidate c;
  const Node& first = g.nodes[group[0].gemm];
  c.x = g.node(first.operands[0]).name;
  c.k = g.node(first.operands[0]).type.shape.last();
  c.dtype = first.type.dtype;
  for (const Sibling& s : group) {
    c.gemms.push_back(g.nodes[s.gemm].name);
    c.weights.push_back(g.nodes[s.weight].name);
    c.n.push_back(g.nodes[s.gemm].type.shape.last());
  }
  return c;
}

}  // namespace

std::string GemmMergeCandidate::merged_name() const {
  return fmt::format("{}", fmt::join(gemms, "_"));
}

std::vector<GemmMergeCandidate> gemm_merge_candidates(const Graph& g) {
  std::vector<GemmMergeCandidate> out;
  for (const auto& group : sibling_groups(g)) out.push_back(describe(g, group));
  return out;
}

bool merge_gemms(Graph& g, const GemmMergeDecider& decide, FusionReport* report) {
  struct Merge {
    std::vector<Sibling> group;
    GemmMergeCandidate candidate;
  };
  std::vector<Merge> merged;
  for (const auto& group : sibling_groups(g)) {
    GemmMergeCandidate c = describe(g, group);
    const GemmMergeDecision d = decide ? decide(c) : GemmMergeDecision{false, "no decider"};
    if (report)
      for (size_t i = 1; i < c.gemms.size(); ++i)
        report->decisions.push_back({"gemm_" + c.merged_name(), c.gemms[0], c.gemms[i],
                                     d.merge ? Verdict::Fused : Verdict::Rejected,
                                     (d.merge ? "merged: " : "kept apart: ") + d.reason});
    if (d.merge) merged.push_back({group, std::move(c)});
  }
  if (merged.empty()) return false;

  // The merged GEMM sits where the first sibling was: x is defined by then, and every user of
  // any sibling comes later. Its weights are params, which may be hoisted to that point.
  std::map<uint32_t, size_t> group_of_first;
  for (size_t k = 0; k < merged.size(); ++k) group_of_first[merged[k].group[0].gemm] = k;
  std::set<uint32_t> emitted;  // hoisted params and later siblings: written early, skipped later
  std::set<std::string> taken;  // names of the old graph: a new name must not shadow a later one
  for (const Node& n : g.nodes) taken.insert(n.name);
  auto fresh = [&](const std::string& hint) {
    std::string name = hint;
    for (int k = 1; taken.count(name); ++k) name = fmt::format("{}.{}", hint, k);
    taken.insert(name);
    return name;
  };
  Rebuild r(g);
  for (const Node& n : g.nodes) {
    const uint32_t i = g.id_of(n).index;
    auto it = group_of_first.find(i);
    if (it == group_of_first.end()) {
      if (!emitted.count(i)) r.copy(n);
      continue;
    }
    const std::vector<Sibling>& group = merged[it->second].group;
    const GemmMergeCandidate& c = merged[it->second].candidate;
    ir::Builder& b = r.builder();
    Node concat{.op = Op::Concat, .name = fresh(c.merged_name() + ".weight"), .loc = n.loc};
    for (const Sibling& s : group) {
      if (s.weight > i && !emitted.count(s.weight)) {
        r.copy(g.nodes[s.weight]);  // a param declared after the first sibling: hoisted
        emitted.insert(s.weight);
      }
      concat.operands.push_back(r.mapped(NodeId{s.weight}));
    }
    const NodeId w = b.add(std::move(concat));
    Node gemm{.op = Op::MatMul, .name = fresh(c.merged_name()),
              .operands = {r.mapped(n.operands[0]), w}, .loc = n.loc};
    const NodeId y = b.add(std::move(gemm));
    int64_t offset = 0;
    for (const Sibling& s : group) {
      const Node& sib = g.nodes[s.gemm];
      Node slice{.op = Op::Slice, .name = sib.name, .type = sib.type, .operands = {y},
                 .scalar = static_cast<double>(offset), .loc = sib.loc};
      r.replace(NodeId{s.gemm}, std::move(slice));
      offset += sib.type.shape.last();
      if (s.gemm != i) emitted.insert(s.gemm);
    }
  }
  g = r.finish();
  return true;
}

}  // namespace mlpc::passes
