#include "ir/op.h"

#include <array>

namespace mlpc::ir {
namespace {

struct OpInfo {
  std::string_view name;
  int arity;
  OpKind kind;
};

constexpr std::array<OpInfo, kNumOps> kOps = {{
#define MLPC_OP(E, NAME, ARITY, KIND) {NAME, ARITY, OpKind::KIND},
#include "ir/ops.def"
#undef MLPC_OP
}};

}  // namespace

std::string_view op_name(Op op) { return kOps[static_cast<int>(op)].name; }
int op_arity(Op op) { return kOps[static_cast<int>(op)].arity; }
OpKind op_kind(Op op) { return kOps[static_cast<int>(op)].kind; }

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Source: return "source";
    case OpKind::Pointwise: return "pointwise";
    case OpKind::Gemm: return "gemm";
    case OpKind::Reduction: return "reduction";
    case OpKind::Composite: return "composite";
    case OpKind::Fused: return "fused";
    case OpKind::Terminator: return "terminator";
  }
  return "?";
}

std::optional<Op> parse_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOps[i].name == name) return static_cast<Op>(i);
  return std::nullopt;
}

}  // namespace mlpc::ir
