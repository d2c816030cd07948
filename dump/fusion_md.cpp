#include "dump/fusion_md.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mlpc {
namespace {

int64_t type_bytes(const ir::TensorType& t, int64_t batch) {
  return t.shape.numel(batch) * static_cast<int64_t>(ir::dtype_size(t.dtype));
}

std::string_view verdict_name(passes::Verdict v) {
  switch (v) {
    case passes::Verdict::Fused: return "fused";
    case passes::Verdict::Recomputed: return "recomputed";
    case passes::Verdict::Rejected: return "rejected";
  }
  return "?";
}

// Markdown table cells must not break the row.
std::string cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::vector<GroupTraffic> group_traffic(const CompiledGraph& c, int64_t batch) {
  std::vector<GroupTraffic> out;
  const ir::Graph& g = c.pipeline.graph;
  for (const ir::Node& n : g.nodes) {
    if (ir::op_kind(n.op) != ir::OpKind::Fused || !n.body) continue;
    GroupTraffic t;
    t.kernel = n.symbol;
    for (ir::NodeId o : n.operands) t.fused_bytes += type_bytes(g.node(o).type, batch);
    t.fused_bytes += type_bytes(n.type, batch);
    const ir::Graph& body = *n.body;
    for (const ir::Node& b : body.nodes) {
      if (b.op == ir::Op::Input || b.op == ir::Op::Return) continue;
      t.nodes.push_back(b.name);
      for (ir::NodeId o : b.operands) t.unfused_bytes += type_bytes(body.node(o).type, batch);
      t.unfused_bytes += type_bytes(b.type, batch);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string fusion_markdown(const CompiledGraph& c, int64_t batch) {
  const std::vector<GroupTraffic> groups = group_traffic(c, batch);
  std::string out = fmt::format("# Fusion report for @{} at batch {}\n\n", c.plan.graph_name, batch);
  out += "Each group below is one generated kernel. HBM bytes: what the kernel reads and writes, "
         "against what its ops would move run one kernel each (every intermediate written and "
         "read back).\n\n";
  out += "| kernel | IR nodes | HBM MB fused | HBM MB one kernel per op | saved MB |\n";
  out += "|---|---|---:|---:|---:|\n";
  int64_t saved = 0;
  for (const GroupTraffic& t : groups) {
    out += fmt::format("| `{}` | {} | {:.2f} | {:.2f} | {:.2f} |\n", t.kernel,
                       cell(fmt::format("%{}", fmt::join(t.nodes, ", %"))), t.fused_bytes / 1e6,
                       t.unfused_bytes / 1e6, t.saved() / 1e6);
    saved += t.saved();
  }
  if (groups.empty()) out += "| (no pointwise groups) | | | | |\n";
  out += fmt::format("\nTotal HBM traffic saved by fusion: {:.2f} MB per forward.\n", saved / 1e6);

  const auto& decisions = c.pipeline.fusion.decisions;
  out += fmt::format("\n## Candidates ({})\n\n", decisions.size());
  if (decisions.empty()) {
    out += "No fusion candidates (fusion is off, or no pointwise op reads another op).\n";
    return out;
  }
  out += "| group | producer | consumer | verdict | reason |\n|---|---|---|---|---|\n";
  for (const passes::FusionDecision& d : decisions)
    out += fmt::format("| `{}` | `%{}` | `%{}` | {} | {} |\n", d.group, d.producer, d.consumer,
                       verdict_name(d.verdict), cell(d.reason));
  return out;
}

}  // namespace mlpc
