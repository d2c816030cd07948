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

enum class OpKind { Source, Pointwise, Gemm, Fused, Terminator };

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

}  // namespace mlpc::ir
