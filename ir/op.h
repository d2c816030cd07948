// Op enum and per-op facts, generated from ops.def.
#pragma once

#include <optional>
#include <string_view>

namespace mlpc::ir {

enum class Op {
#define MLPC_OP(E, NAME, ARITY, KIND) E,
#include "ir/ops.def"
#undef MLPC_OP
};

enum class OpKind { Source, Pointwise, Gemm, Reduction, Composite, Fused, Terminator };

inline constexpr int kNumOps = 0
#define MLPC_OP(E, NAME, ARITY, KIND) +1
#include "ir/ops.def"
#undef MLPC_OP
    ;

std::string_view op_name(Op op);
int op_arity(Op op);  // -1: variadic
OpKind op_kind(Op op);
std::string_view op_kind_name(OpKind k);
std::optional<Op> parse_op(std::string_view name);

inline bool is_pointwise(Op op) { return op_kind(op) == OpKind::Pointwise; }
inline bool is_reduction(Op op) { return op_kind(op) == OpKind::Reduction; }
inline bool is_fused(Op op) { return op_kind(op) == OpKind::Fused; }
// Ops whose node scalar is an attribute written in the text form after the operands.
inline bool has_scalar(Op op) {
  return op == Op::Scale || op == Op::Slice || op == Op::AddScalar || op == Op::RmsNorm || op == Op::LayerNorm;
}

}  // namespace mlpc::ir
