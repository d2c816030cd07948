#include "compiler/check.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"
#include "host/random_init.h"
#include "runtime/reference/reference.h"

namespace mlpc {

Values random_values(const ir::Graph& g, int64_t batch, uint64_t seed) {
  Values v;
  for (ir::NodeId id : g.inputs()) v[g.node(id).name] = runtime::random_input(g, id, batch, seed);
  for (ir::NodeId id : g.params()) v[g.node(id).name] = runtime::random_param(g, id, seed);
  return v;
}

void check_reference_fits(const ir::Graph& g, int64_t batch, int64_t limit_bytes) {
  double bytes = 0;
  for (const ir::Node& n : g.nodes)
    if (n.op != ir::Op::Return) bytes += 8.0 * static_cast<double>(n.type.shape.numel(batch));
  if (bytes > static_cast<double>(limit_bytes))
    throw Error(fmt::format("the fp64 reference of @{} at batch {} needs {:.1f} GiB of host "
                            "memory (the limit is {:.0f} GiB): use a smaller --batch",
                            g.name, batch, bytes / (1 << 30),
                            static_cast<double>(limit_bytes) / (1 << 30)));
}

std::vector<int64_t> sample_rows(int64_t batch, int64_t max_rows) {
  std::vector<int64_t> rows;
  if (batch <= max_rows) {
    for (int64_t r = 0; r < batch; ++r) rows.push_back(r);
    return rows;
  }
  for (int64_t i = 0; i < max_rows; ++i) rows.push_back(i * (batch - 1) / (max_rows - 1));
  return rows;
}

std::vector<runtime::HostTensor> reference_on_rows(const ir::Graph& g, const Values& values,
                                                   const std::vector<int64_t>& rows) {
  Values sliced = values;
  for (ir::NodeId id : g.inputs()) {
    auto& t = sliced[g.node(id).name];
    t = runtime::take_rows(t, rows);
  }
  return runtime::reference_forward(g, sliced);
}

runtime::Tolerance graph_tolerance(const ir::Graph& g, ir::DType dtype, bool tf32x3) {
  int64_t max_k = 0;
  std::vector<int> depth(g.size(), 0);  // ops on the longest path from an input
  int max_depth = 1;
  for (const ir::Node& n : g.nodes) {
    // A GEMM accumulates K products per output, a row reduction (or a norm or softmax, which
    // hold one) the row's length: both round like a K-long sum.
    const ir::OpKind kind = ir::op_kind(n.op);
    if (kind == ir::OpKind::Gemm)
      max_k = std::max(max_k, g.node(n.operands[1]).type.shape.last());
    if (kind == ir::OpKind::Reduction || kind == ir::OpKind::Composite)
      max_k = std::max(max_k, g.node(n.operands[0]).type.shape.last());
    if (ir::op_kind(n.op) == ir::OpKind::Source || n.op == ir::Op::Return) continue;
    int d = 0;
    for (ir::NodeId o : n.operands) d = std::max(d, depth[o.index]);
    depth[g.id_of(n).index] = d + 1;
    max_depth = std::max(max_depth, d + 1);
  }
  return runtime::tolerance_for(dtype, max_k, max_depth, tf32x3);
}

const ir::Node* residual_base(const ir::Graph& g, size_t output) {
  const std::vector<ir::NodeId> outs = g.outputs();
  if (output >= outs.size()) return nullptr;
  const ir::Node& y = g.node(outs[output]);
  if (y.op != ir::Op::Add) return nullptr;
  for (ir::NodeId o : y.operands) {
    const ir::Node& x = g.node(o);
    if (x.op == ir::Op::Input && x.type == y.type) return &x;
  }
  return nullptr;
}

Check compare_rows(const ir::Graph& g, const std::vector<runtime::HostTensor>& got,
                   const std::vector<int64_t>& rows,
                   const std::vector<runtime::HostTensor>& reference, bool tf32x3,
                   const Values* values) {
  Check c;
  c.rows = rows;
  for (size_t i = 0; i < got.size() && i < reference.size(); ++i) {
    const runtime::Tolerance tol = graph_tolerance(g, got[i].dtype, tf32x3);
    const runtime::HostTensor mine = runtime::take_rows(got[i], rows);
    runtime::Comparison r = runtime::compare(mine, reference[i], tol);
    c.max_abs_err = std::max(c.max_abs_err, r.max_abs_err);
    c.worst_ratio = std::max(c.worst_ratio, r.worst_ratio);
    c.ok = c.ok && r.ok;
    if (g.node(g.outputs()[i]).op == ir::Op::Softmax) {
      runtime::Comparison l = runtime::compare_log_softmax(mine, reference[i], tol);
      c.contribution_worst_ratio = std::max(c.contribution_worst_ratio, l.worst_ratio);
      c.ok = c.ok && l.ok;
    }
    const ir::Node* base = residual_base(g, i);
    if (!base || !values || !values->count(base->name)) continue;
    const runtime::HostTensor x = runtime::take_rows(values->at(base->name), rows);
    runtime::Comparison d = runtime::compare_contribution(mine, reference[i], &x, tol);
    c.contribution_worst_ratio = std::max(c.contribution_worst_ratio, d.worst_ratio);
    c.ok = c.ok && d.ok;
  }
  c.ok = c.ok && got.size() == reference.size();
  return c;
}

}  // namespace mlpc
