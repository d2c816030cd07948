#include "ir/infer.h"

#include <fmt/format.h>

namespace mlpc::ir {

const Shape* broadcast_shape(const Shape& a, const Shape& b) {
  if (a == b) return &a;
  auto is_row_of = [](const Shape& row, const Shape& full) {
    return row.rank() == 1 && full.rank() >= 1 && row.dims[0] == full.dims.back() &&
           row.dims[0] != kBatchDim;
  };
  if (is_row_of(b, a)) return &a;
  if (is_row_of(a, b)) return &b;
  return nullptr;
}

Inferred infer_type(Op op, std::span<const TensorType> in, const TensorType& declared,
                    const Graph* body) {
  auto fail = [](std::string msg) { return Inferred{{}, std::move(msg)}; };
  int arity = op_arity(op);
  if (arity >= 0 && static_cast<int>(in.size()) != arity)
    return fail(fmt::format("'{}' takes {} operand{}, got {}", op_name(op), arity,
                            arity == 1 ? "" : "s", in.size()));
  switch (op_kind(op)) {
    case OpKind::Source:
      if (declared.shape.rank() == 0) return fail("a tensor needs at least one dim");
      for (int i = 0; i < declared.shape.rank(); ++i)
        if (declared.shape.dims[i] == kBatchDim ? i != 0 : declared.shape.dims[i] <= 0)
          return fail(i != 0 && declared.shape.dims[i] == kBatchDim
                          ? "only the leading dim may be the symbolic batch dim"
                          : "dims must be positive");
      {
        int64_t elements = 1;
        for (int64_t d : declared.shape.dims)
          if (d != kBatchDim) {
            if (d > kMaxDim || elements > kMaxStaticElements / d)
              return fail(fmt::format("tensor of {} elements is too large (the limit is {})",
                                      to_string(declared.shape), kMaxStaticElements));
            elements *= d;
          }
      }
      if (op == Op::Param && declared.shape.has_batch())
        return fail("a param cannot have the symbolic batch dim");
      return {declared, {}};
    case OpKind::Gemm: {
      const TensorType& x = in[0];
      const TensorType& w = in[1];
      if (x.dtype != w.dtype)
        return fail(fmt::format("matmul operands differ in dtype: {} vs {}", dtype_name(x.dtype),
                                dtype_name(w.dtype)));
      if (w.shape.rank() != 2 || w.shape.has_batch())
        return fail(fmt::format("matmul weight must be a static [N, K] matrix, got {}",
                                to_string(w.shape)));
      if (x.shape.rank() < 1 || x.shape.last() != w.shape.dims[1])
        return fail(fmt::format("matmul inner dims differ: x is {}, weight is {} (stored [N, K])",
                                to_string(x.shape), to_string(w.shape)));
      Shape out = x.shape;
      out.dims.back() = w.shape.dims[0];
      if (in.size() == 3) {  // the epilogue's operand: a bias row vector or a residual
        const TensorType& e = in[2];
        bool residual = op == Op::MatMulResidual;
        Shape want = residual ? out : Shape{{out.dims.back()}};
        if (e.dtype != x.dtype || !(e.shape == want))
          return fail(fmt::format("{} operand of {} must be {}{}, got {}",
                                  residual ? "residual" : "bias", op_name(op),
                                  dtype_name(x.dtype), to_string(want), to_string(e)));
      }
      return {{x.dtype, out}, {}};
    }
    case OpKind::Pointwise: {
      if (in.size() == 2) {
        if (in[0].dtype != in[1].dtype)
          return fail(fmt::format("'{}' operands differ in dtype: {} vs {}", op_name(op),
                                  dtype_name(in[0].dtype), dtype_name(in[1].dtype)));
        const Shape* s = broadcast_shape(in[0].shape, in[1].shape);
        if (!s)
          return fail(fmt::format("'{}' operand shapes do not broadcast: {} vs {}", op_name(op),
                                  to_string(in[0].shape), to_string(in[1].shape)));
        return {{in[0].dtype, *s}, {}};
      }
      if (op == Op::Cast) return {{declared.dtype, in[0].shape}, {}};
      return {in[0], {}};
    }
    case OpKind::Fused: {
      if (!body) return fail("fused.pointwise needs a region");
      auto ins = body->inputs();
      if (ins.size() != in.size())
        return fail(fmt::format("region takes {} value{}, fused node passes {}", ins.size(),
                                ins.size() == 1 ? "" : "s", in.size()));
      for (size_t i = 0; i < in.size(); ++i)
        if (!(body->node(ins[i]).type == in[i]))
          return fail(fmt::format("region value %{} is {}, operand is {}",
                                  body->node(ins[i]).name, to_string(body->node(ins[i]).type),
                                  to_string(in[i])));
      auto outs = body->outputs();
      if (outs.size() != 1) return fail("a region yields exactly one value");
      return {body->node(outs[0]).type, {}};
    }
    case OpKind::Terminator:
      if (in.empty()) return fail("return needs at least one value");
      return {{}, {}};
  }
  return fail("unknown op");
}

}  // namespace mlpc::ir
