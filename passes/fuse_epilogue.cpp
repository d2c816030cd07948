#include "passes/fuse_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::Node;
using ir::NodeId;
using ir::Op;

// The GEMM op that results from applying `consumer` to the output of `gemm`, or nullopt.
std::optional<Op> folded(const ir::Graph& g, const Node& gemm, const Node& consumer,
                         NodeId gemm_id, int* other_operand, std::string* why_not) {
  if (consumer.op == Op::Add && gemm.op == Op::MatMul) {
    int other = consumer.operands[0] == gemm_id ? 1 : 0;
    if (consumer.operands[other] == gemm_id) {
      *why_not = "adds the product to itself";
      return std::nullopt;
    }
    *other_operand = other;
    const ir::Shape& s = g.node(consumer.operands[other]).type.shape;
    if (s == consumer.type.shape) return Op::MatMulResidual;
    return Op::MatMulBias;  // the verifier allows only a row vector otherwise
  }
  if (gemm.op == Op::MatMulBias) {
    if (consumer.op == Op::Relu) return Op::MatMulBiasRelu;
    if (consumer.op == Op::GeluTanh) return Op::MatMulBiasGeluTanh;
    if (consumer.op == Op::Gelu) {
      *why_not = "gelu is exact (erf); cuBLASLt's GELU epilogue is the tanh approximation";
      return std::nullopt;
    }
  }
  *why_not = fmt::format("cuBLASLt has no epilogue for {} after {}", ir::op_name(consumer.op),
                         ir::op_name(gemm.op));
  return std::nullopt;
}

// One round of folding: each GEMM absorbs at most one consumer. Returns whether any did.
bool fold_once(ir::Graph& g, FusionReport* report, const EpilogueDecider& decide,
               std::set<std::string>& refused) {
  auto users = g.users();
  std::vector<int> fold_into(g.size(), -1);  // consumer index -> GEMM index folded into it
  std::vector<bool> absorbed(g.size(), false);
  std::vector<Op> new_op(g.size());
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
    std::optional<Op> op = folded(g, n, consumer, g.id_of(n), &other, &why_not);
    EpilogueDecision d{op.has_value(), {}};
    if (op && decide) {
      const uint32_t c = users[i][0].index;
      const bool more_pointwise =
          std::any_of(users[c].begin(), users[c].end(),
                      [&](NodeId u) { return ir::is_pointwise(g.node(u).op); });
      d = decide({n.name, consumer.name, n.op, *op, n.type.shape.last(),
                  g.node(n.operands[0]).type.shape.last(), n.type.dtype, !more_pointwise});
      if (!d.fold) refused.insert(n.name);  // asked once: later rounds must not ask again
    }
    if (report) {
      std::string reason = !op ? why_not : fmt::format("{} epilogue", ir::op_name(*op));
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
    uint32_t c = users[i][0].index;
    fold_into[c] = static_cast<int>(i);
    absorbed[i] = true;
    new_op[c] = *op;
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
    f.op = new_op[i];
    f.name = n.name;
    f.loc = n.loc;
    for (NodeId o : gemm.operands) f.operands.push_back(r.mapped(o));
    if (extra[i] >= 0) f.operands.push_back(r.mapped(NodeId{static_cast<uint32_t>(extra[i])}));
    r.replace(g.id_of(n), std::move(f));
  }
  g = r.finish();
  return true;
}

}  // namespace

bool fuse_epilogue(ir::Graph& g, FusionReport* report, const EpilogueDecider& decide) {
  bool changed = false;
  // matmul -> matmul_bias -> matmul_bias_relu takes two rounds. A refused GEMM keeps its name
  // (a fold renames only the GEMMs it absorbs).
  std::set<std::string> refused;
  while (fold_once(g, report, decide, refused)) changed = true;
  return changed;
}

}  // namespace mlpc::passes
