#include "ir/infer.h"

#include <fmt/format.h>

#include <algorithm>

namespace mlpc::ir {

const Shape* broadcast_shape(const Shape& a, const Shape& b) {
  if (a == b) return &a;
  auto is_row_of = [](const Shape& row, const Shape& full) {
    return row.rank() == 1 && full.rank() >= 1 && row.dims[0] == full.dims.back() &&
           row.dims[0] != kBatchDim;
  };
  if (is_row_of(b, a)) return &a;
  if (is_row_of(a, b)) return &b;
  // A per-row value [.., 1] (a kept-dim reduction) against a full [.., N] with the same rows.
  auto is_column_of = [](const Shape& col, const Shape& full) {
    return col.rank() == full.rank() && col.last() == 1 &&
           std::equal(col.dims.begin(), col.dims.end() - 1, full.dims.begin());
  };
  if (is_column_of(b, a)) return &a;
  if (is_column_of(a, b)) return &b;
  return nullptr;
}

Inferred infer_type(Op op, std::span<const TensorType> in, const TensorType& declared,
                    const Graph* body, const GemmEpilogue& epilogue) {
  auto fail = [](std::string msg) { return Inferred{{}, std::move(msg)}; };
  if (op_kind(op) != OpKind::Gemm && !epilogue.plain())
    return fail(fmt::format("'{}' has a GEMM epilogue (bias, residual or act): only matmul has "
                            "one", op_name(op)));
  int arity = op_arity(op);
  if (arity >= 0 && static_cast<int>(in.size()) != arity)
    return fail(fmt::format("'{}' takes {} operand{}, got {}", op_name(op), arity,
                            arity == 1 ? "" : "s", in.size()));
  if (op == Op::Concat) {  // params [N_i, K...] stacked along dim 0
    if (in.size() < 2) return fail("concat takes at least 2 operands");
    Shape out = in[0].shape;
    out.dims[0] = 0;
    for (const TensorType& t : in) {
      if (t.dtype != in[0].dtype || t.shape.rank() != in[0].shape.rank() || t.shape.has_batch() ||
          !std::equal(t.shape.dims.begin() + 1, t.shape.dims.end(), in[0].shape.dims.begin() + 1))
        return fail(fmt::format("concat operands must share dtype and trailing dims: {} vs {}",
                                to_string(in[0]), to_string(t)));
      out.dims[0] += t.shape.dims[0];
    }
    return {{in[0].dtype, out}, {}};
  }
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
      const GemmEpilogue& e = epilogue;
      const size_t want = 2 + (e.bias ? 1 : 0) + (e.residual ? 1 : 0);
      if (in.size() != want)
        return fail(fmt::format("'{}' {}takes {} operands (x, W{}{}), got {}", op_name(op),
                                e.bias || e.residual ? "with this epilogue " : "", want,
                                e.bias ? ", bias" : "", e.residual ? ", residual" : "",
                                in.size()));
      if (e.act && !is_gemm_activation(*e.act))
        return fail(fmt::format("'{}' is not a matmul epilogue activation (relu, gelu, gelu_tanh, "
                                "silu, sigmoid, tanh)", op_name(*e.act)));
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
      // The epilogue's operands: a bias row vector [N], then a residual shaped like y.
      auto check = [&](const TensorType& t, bool residual) -> std::string {
        Shape want_shape = residual ? out : Shape{{out.dims.back()}};
        if (t.dtype == x.dtype && t.shape == want_shape) return {};
        return fmt::format("{} operand of matmul must be {}{}, got {}",
                           residual ? "residual" : "bias", dtype_name(x.dtype),
                           to_string(want_shape), to_string(t));
      };
      if (e.bias)
        if (std::string why = check(in[2], false); !why.empty()) return fail(why);
      if (e.residual)
        if (std::string why = check(in.back(), true); !why.empty()) return fail(why);
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
      if (op == Op::Slice) {  // the width comes from the declared type; the offset is checked
        const Shape& s = in[0].shape;  // by the verifier, which sees the node
        const Shape& d = declared.shape;
        if (d.rank() != s.rank() || d.last() == kBatchDim || d.last() < 1 ||
            d.last() > s.last() || !std::equal(s.dims.begin(), s.dims.end() - 1, d.dims.begin()))
          return fail(fmt::format("slice of {} must keep its leading dims and take 1 to {} "
                                  "columns, got {}", to_string(s), s.last(), to_string(d)));
        return {{in[0].dtype, d}, {}};
      }
      return {in[0], {}};
    }
    case OpKind::Reduction: {
      Shape out = in[0].shape;
      out.dims.back() = 1;
      return {{in[0].dtype, out}, {}};
    }
    case OpKind::Composite: {
      // rmsnorm / layernorm: a weight (and a bias) row vector [N] of x's dtype.
      Shape row{{in[0].shape.last()}};
      for (size_t i = 1; i < in.size(); ++i)
        if (in[i].dtype != in[0].dtype || !(in[i].shape == row) || row.dims[0] == kBatchDim)
          return fail(fmt::format("'{}' {} must be {}{}, got {}", op_name(op),
                                  i == 1 ? "weight" : "bias", dtype_name(in[0].dtype),
                                  to_string(row), to_string(in[i])));
      return {in[0], {}};
    }
    case OpKind::Fused: {
      if (!body) return fail(fmt::format("{} needs a region", op_name(op)));
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
