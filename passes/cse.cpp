#include "passes/cse.h"

#include <fmt/format.h>

#include <unordered_map>

#include "passes/rebuild.h"

namespace mlpc::passes {

bool cse(ir::Graph& g) {
  Rebuild r(g);
  std::unordered_map<std::string, ir::NodeId> seen;
  bool changed = false;
  for (const ir::Node& n : g.nodes) {
    bool mergeable = ir::op_kind(n.op) == ir::OpKind::Pointwise ||
                     ir::op_kind(n.op) == ir::OpKind::Gemm;
    if (!mergeable) {
      r.copy(n);
      continue;
    }
    // Types are part of the key: cast to different dtypes must stay apart. So is a matmul's
    // epilogue: its operands alone do not say which is the bias and which the residual.
    std::string key = fmt::format("{}|{}|{}|{}|{}", ir::op_name(n.op), n.scalar,
                                  ir::dtype_name(n.type.dtype), n.operands.size(),
                                  ir::epilogue_formula(n.epilogue));
    for (ir::NodeId o : n.operands) key += fmt::format("|{}", r.mapped(o).index);
    auto [it, inserted] = seen.emplace(key, ir::NodeId{});
    if (inserted) {
      it->second = r.copy(n);
    } else {
      r.alias(g.id_of(n), it->second);
      changed = true;
    }
  }
  if (changed) g = r.finish();
  return changed;
}

}  // namespace mlpc::passes
