#include "passes/fuse_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/gemm_epilogue.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::Node;
using ir::NodeId;
using ir::Op;

// The epilogue `gemm` has with `consumer` folded into it, or nullopt (and why not).
// `more_pointwise`: pointwise ops read the consumer's result.
std::optional<ir::GemmEpilogue> folded(const ir::Graph& g, const Node& gemm,
                                       const Node& consumer, NodeId gemm_id, bool more_pointwise,
                                       int* other_operand, std::string* why_not) {
  ir::GemmEpilogue e = gemm.epilogue;
  auto no = [&](std::string why) {
    *why_not = std::move(why);
    return std::nullopt;
  };
  if (consumer.op == Op::Add) {
    int other = consumer.operands[0] == gemm_id ? 1 : 0;
    if (consumer.operands[other] == gemm_id) return no("adds the product to itself");
    if (!(consumer.type.shape == gemm.type.shape)) return no("the add broadcasts the product");
    *other_operand = other;
    const ir::Shape& s = g.node(consumer.operands[other]).type.shape;
    if (s == consumer.type.shape) {
      if (e.residual) return no("the GEMM adds a residual already");
      e.residual = true;
    } else if (s == ir::Shape{{consumer.type.shape.last()}}) {
      if (e.bias) return no("the GEMM adds a bias already");
      if (e.act)
        return no(fmt::format("the bias would come after {}; the epilogue adds it before",
                              ir::op_name(*e.act)));
      e.bias = true;
    } else {
      return no("adds a per-row value; the epilogue adds a bias row vector or a residual");
    }
  } else if (ir::is_gemm_activation(consumer.op)) {
    if (e.act) return no(fmt::format("the GEMM applies {} already", ir::op_name(*e.act)));
    // Before more pointwise work the activation rides the fused kernel that runs anyway, and
    // the plain product stays open to merge_gemms and the gated GEMM kernels.
    if (e.plain() && more_pointwise)
      return no(fmt::format("{} joins the fused kernel after it: folded into a plain GEMM it "
                            "saves no launch", ir::op_name(consumer.op)));
    if (e.residual)
      return no(fmt::format("{} would apply to the residual; the epilogue adds it after its "
                            "activation", ir::op_name(consumer.op)));
    e.act = consumer.op;
  } else {
    return no(fmt::format("no GEMM epilogue applies {}", ir::op_name(consumer.op)));
  }
  // Any GEMM may run on cuBLASLt (a generated kernel takes one only by choice, at plan time).
  if (std::string why = cannot_run(GemmBackend::CublasLt, e); !why.empty()) return no(why);
  return e;
}

// One round of folding: each GEMM absorbs at most one consumer. Returns whether any did.
bool fold_once(ir::Graph& g, FusionReport* report, const EpilogueDecider& decide,
               std::set<std::string>& refused) {
  auto users = g.users();
  std::vector<int> fold_into(g.size(), -1);  // consumer index -> GEMM index folded into it
  std::vector<bool> absorbed(g.size(), false);
  std::vector<ir::GemmEpilogue> new_epilogue(g.size());
  std::vector<int> extra(g.size(), -1);
  bool any = false;
  for (const Node& n : g.nodes) {
    if (ir::op_kind(n.op) != ir::OpKind::Gemm) continue;
    uint32_t i = g.id_of(n).index;
    if (users[i].size() != 1 || refused.count(n.name)) continue;
    const Node& consumer = g.node(users[i][0]);
    if (!ir::is_pointwise(consumer.op)) continue;
    // Two GEMMs added together: the first folds this round (the other becomes its residual);
    // a consumer absorbs one GEMM.
    if (fold_into[users[i][0].index] >= 0) continue;
    int other = -1;
    std::string why_not;
    const uint32_t c = users[i][0].index;
    const bool more_pointwise = std::any_of(users[c].begin(), users[c].end(), [&](NodeId u) {
      return ir::is_pointwise(g.node(u).op);
    });
    std::optional<ir::GemmEpilogue> op =
        folded(g, n, consumer, g.id_of(n), more_pointwise, &other, &why_not);
    EpilogueDecision d{op.has_value(), {}};
    if (op && decide) {
      d = decide({n.name, consumer.name, n.epilogue, *op, n.type.shape.last(),
                  g.node(n.operands[0]).type.shape.last(), n.type.dtype, !more_pointwise});
      if (!d.fold) refused.insert(n.name);  // asked once: later rounds must not ask again
    }
    if (report) {
      std::string reason = !op ? why_not : "epilogue " + ir::epilogue_formula(*op);
      if (op && !d.reason.empty()) reason += (d.fold ? ": " : " not taken: ") + d.reason;
      FusionDecision rec{"gemm_" + n.name, n.name, consumer.name,
                         op && d.fold ? Verdict::Fused : Verdict::Rejected, reason};
      // A GEMM that cannot fold is looked at again each round: report it once.
      auto same = [&](const FusionDecision& o) {
        return o.group == rec.group && o.producer == rec.producer &&
               o.consumer == rec.consumer && o.verdict == rec.verdict && o.reason == rec.reason;
      };
      if (std::none_of(report->decisions.begin(), report->decisions.end(), same))
        report->decisions.push_back(std::move(rec));
    }
    if (!op || !d.fold) continue;
    fold_into[c] = static_cast<int>(i);
    absorbed[i] = true;
    new_epilogue[c] = *op;
    extra[c] = other >= 0 ? static_cast<int>(consumer.operands[other].index) : -1;
    any = true;
  }
  if (!any) return false;
  // The folded GEMM takes the consumer's place (and name): its operands all come before it.
  Rebuild r(g);
  for (const Node& n : g.nodes) {
    uint32_t i = g.id_of(n).index;
    if (absorbed[i]) continue;
    if (fold_into[i] < 0) {
      r.copy(n);
      continue;
    }
    const Node& gemm = g.nodes[fold_into[i]];
    Node f;
    f.op = Op::MatMul;
    f.epilogue = new_epilogue[i];
    f.name = n.name;
    f.loc = n.loc;
    // x, W, bias, residual: the consumer's other operand takes the slot of what it adds.
    for (NodeId o : gemm.operands) f.operands.push_back(r.mapped(o));
    if (extra[i] >= 0) {
      const NodeId added = r.mapped(NodeId{static_cast<uint32_t>(extra[i])});
      if (f.epilogue.bias && !gemm.epilogue.bias)
        f.operands.insert(f.operands.begin() + 2, added);
      else
        f.operands.push_back(added);
    }
    r.replace(g.id_of(n), std::move(f));
  }
  g = r.finish();
  return true;
}

}  // namespace

bool fuse_epilogue(ir::Graph& g, FusionReport* report, const EpilogueDecider& decide) {
  bool changed = false;
  // matmul -> add bias -> relu takes two rounds. A refused GEMM keeps its name
  // (a fold renames only the GEMMs it absorbs).
  std::set<std::string> refused;
  while (fold_once(g, report, decide, refused)) changed = true;
  return changed;
}

}  // namespace mlpc::passes
