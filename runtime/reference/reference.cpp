#include "runtime/reference/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ir/error.h"
#include "host/parallel_for.h"
#include "runtime/reference/reference_gemm.h"

namespace mlpc::runtime {
namespace {

double gelu_tanh(double x) {
  double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(inner));
}

double apply_unary(const ir::Node& n, double x) {
  switch (n.op) {
    case ir::Op::Relu: return x > 0 ? x : 0.0;
    case ir::Op::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ir::Op::GeluTanh: return gelu_tanh(x);
    case ir::Op::Silu: return x / (1.0 + std::exp(-x));
    case ir::Op::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case ir::Op::Tanh: return std::tanh(x);
    case ir::Op::Exp: return std::exp(x);
    case ir::Op::Neg: return -x;
    case ir::Op::Scale: return x * n.scalar;
    case ir::Op::Cast: return round_to(n.type.dtype, x);
    case ir::Op::Rsqrt: return 1.0 / std::sqrt(x);
    case ir::Op::Sqrt: return std::sqrt(x);
    case ir::Op::Square: return x * x;
    case ir::Op::AddScalar: return x + n.scalar;
    default: break;
  }
  MLPC_ASSERT(false, fmt::format("reference has no unary op '{}'", ir::op_name(n.op)));
}

double apply_binary(ir::Op op, double a, double b) {
  switch (op) {
    case ir::Op::Add: return a + b;
    case ir::Op::Sub: return a - b;
    case ir::Op::Mul: return a * b;
    case ir::Op::Div: return a / b;
    default: break;
  }
  MLPC_ASSERT(false, fmt::format("reference has no binary op '{}'", ir::op_name(op)));
}

// Element i of a binary operand: full tensors index directly, row vectors by column.
double at(const HostTensor& t, int64_t i) {
  return static_cast<int64_t>(t.data.size()) == 1 ? t.data[0]
                                                  : t.data[i % static_cast<int64_t>(t.data.size())];
}

// y[r, j] = sum_k x[r, k] w[j, k] (runtime/reference/reference_gemm.h).
HostTensor matmul(const HostTensor& x, const HostTensor& w, ir::DType dtype) {
  int64_t k = x.row_len(), n = w.dims[0], rows = x.numel() / k;
  HostTensor y{dtype, x.dims, {}};
  y.dims.back() = n;
  y.data.assign(rows * n, 0.0);
  reference_gemm(x.data.data(), w.data.data(), y.data.data(), rows, k, n);
  return y;
}

// f(i) for i in [0, n), in chunks over the cores: a pointwise op over a [8192, 3072] tensor
// is 25M calls of tanh or erf.
template <typename F>
void for_each_index(int64_t n, F&& f) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  if (n <= kChunk) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t end = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < end; ++i) f(i);
  });
}

// Element i of `big`'s iteration space in operand t: t is `big` itself, a row vector, or a
// per-row value [.., 1] that broadcasts across its row.
double broadcast_at(const HostTensor& t, const HostTensor& big, int64_t i) {
  bool per_row = t.dims.size() == big.dims.size() && t.row_len() == 1 && big.row_len() != 1;
  return per_row ? t.data[i / big.row_len()] : at(t, i);
}

// Row reductions over the last axis, keeping it as 1.
HostTensor reduce_rows(ir::Op op, const HostTensor& x) {
  int64_t n = x.row_len(), rows = x.numel() / n;
  HostTensor y{x.dtype, x.dims, std::vector<double>(rows)};
  y.dims.back() = 1;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x.data[r * n];
    double acc = op == ir::Op::ReduceMax ? row[0] : 0.0;
    for (int64_t i = 0; i < n; ++i)
      acc = op == ir::Op::ReduceMax ? std::max(acc, row[i]) : acc + row[i];
    y.data[r] = op == ir::Op::ReduceMean ? acc / static_cast<double>(n) : acc;
  }
  return y;
}

// rmsnorm, layernorm and softmax over the last axis, computed directly (not from the expansion
// passes/expand_composites makes, so the two check each other).
HostTensor composite(const ir::Node& node, const HostTensor& x, const HostTensor* w,
                     const HostTensor* b) {
  int64_t n = x.row_len(), rows = x.numel() / n;
  HostTensor y{node.type.dtype, x.dims, std::vector<double>(x.data.size())};
  for (int64_t r = 0; r < rows; ++r) {
    const double* in = &x.data[r * n];
    double* out = &y.data[r * n];
    double mean = 0, sq = 0, max = in[0], sum = 0;
    for (int64_t i = 0; i < n; ++i) mean += in[i] / static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) max = std::max(max, in[i]);
    for (int64_t i = 0; i < n; ++i) {
      double c = node.op == ir::Op::LayerNorm ? in[i] - mean : in[i];
      sq += c * c / static_cast<double>(n);
      sum += std::exp(in[i] - max);
    }
    double inv = 1.0 / std::sqrt(sq + node.scalar);
    for (int64_t i = 0; i < n; ++i) {
      switch (node.op) {
        case ir::Op::RmsNorm: out[i] = in[i] * inv * w->data[i]; break;
        case ir::Op::LayerNorm: out[i] = (in[i] - mean) * inv * w->data[i] + b->data[i]; break;
        case ir::Op::Softmax: out[i] = std::exp(in[i] - max) / sum; break;
        default: MLPC_ASSERT(false, fmt::format("reference has no composite '{}'",
                                                ir::op_name(node.op)));
      }
    }
  }
  return y;
}

std::vector<HostTensor> evaluate(const ir::Graph& g, std::vector<HostTensor> bound_inputs,
                                 const std::map<std::string, HostTensor>* named,
                                 const ReferenceProgress* progress) {
  std::vector<HostTensor> v(g.size());
  size_t next_input = 0;
  size_t done = 0;
  for (const ir::Node& n : g.nodes) {
    if (progress && *progress) (*progress)(done++, g.nodes.size(), n);
    HostTensor& out = v[g.id_of(n).index];
    auto operand = [&](int i) -> const HostTensor& { return v[n.operands[i].index]; };
    switch (ir::op_kind(n.op)) {
      case ir::OpKind::Source: {
        if (n.op == ir::Op::Concat) {  // params stacked along dim 0: row-major, one after another
          out = HostTensor{n.type.dtype, n.type.shape.dims, {}};
          for (size_t i = 0; i < n.operands.size(); ++i)
            out.data.insert(out.data.end(), operand(static_cast<int>(i)).data.begin(),
                            operand(static_cast<int>(i)).data.end());
          break;
        }
        if (!named) {  // a region: its inputs are the fused node's operands, in order
          out = std::move(bound_inputs[next_input++]);
          break;
        }
        auto it = named->find(n.name);
        if (it == named->end())
          throw Error(fmt::format("reference: no value bound for %{}", n.name));
        out = it->second;
        break;
      }
      case ir::OpKind::Gemm: {
        out = matmul(operand(0), operand(1), n.type.dtype);
        // The epilogue, in fp64 like the rest: y = act(x . W^T + bias) + residual.
        const ir::GemmEpilogue& e = n.epilogue;
        if (!e.plain()) {
          const HostTensor* bias = e.bias ? &operand(2) : nullptr;
          const HostTensor* residual =
              e.residual ? &operand(static_cast<int>(n.operands.size()) - 1) : nullptr;
          ir::Node act;
          if (e.act) act.op = *e.act;
          for_each_index(static_cast<int64_t>(out.data.size()), [&](int64_t i) {
            double v = out.data[i];
            if (bias) v += at(*bias, i);
            if (e.act) v = apply_unary(act, v);
            if (residual) v += residual->data[i];
            out.data[i] = v;
          });
        }
        break;
      }
      case ir::OpKind::Pointwise: {
        const HostTensor& a = operand(0);
        if (n.op == ir::Op::Slice) {  // columns [offset, offset + width) of every row
          const int64_t width = n.type.shape.last(), ld = a.row_len();
          const auto offset = static_cast<int64_t>(n.scalar);
          out = HostTensor{n.type.dtype, a.dims, {}};
          out.dims.back() = width;
          out.data.reserve(static_cast<size_t>(a.numel() / ld * width));
          for (int64_t r = 0; r < a.numel() / ld; ++r)
            out.data.insert(out.data.end(), a.data.begin() + r * ld + offset,
                            a.data.begin() + r * ld + offset + width);
          break;
        }
        if (n.operands.size() == 2) {
          const HostTensor& b = operand(1);
          const HostTensor& big = a.data.size() >= b.data.size() ? a : b;
          out = HostTensor{n.type.dtype, big.dims, std::vector<double>(big.data.size())};
          for_each_index(static_cast<int64_t>(out.data.size()), [&](int64_t i) {
            out.data[i] = apply_binary(n.op, broadcast_at(a, big, i), broadcast_at(b, big, i));
          });
        } else {
          out = HostTensor{n.type.dtype, a.dims, std::vector<double>(a.data.size())};
          for_each_index(static_cast<int64_t>(out.data.size()),
                         [&](int64_t i) { out.data[i] = apply_unary(n, a.data[i]); });
        }
        break;
      }
      case ir::OpKind::Reduction:
        out = reduce_rows(n.op, operand(0));
        break;
      case ir::OpKind::Composite:
        out = composite(n, operand(0), n.operands.size() > 1 ? &operand(1) : nullptr,
                        n.operands.size() > 2 ? &operand(2) : nullptr);
        break;
      case ir::OpKind::Fused: {
        std::vector<HostTensor> args;
        for (ir::NodeId o : n.operands) args.push_back(v[o.index]);
        out = std::move(evaluate(*n.body, std::move(args), nullptr, nullptr)[0]);
        break;
      }
      case ir::OpKind::Terminator: {
        std::vector<HostTensor> results;
        for (ir::NodeId o : n.operands) results.push_back(v[o.index]);
        return results;
      }
    }
  }
  MLPC_ASSERT(false, "graph without return");
}

}  // namespace

std::vector<HostTensor> reference_forward(const ir::Graph& g,
                                          const std::map<std::string, HostTensor>& values,
                                          const ReferenceProgress& progress) {
  return evaluate(g, {}, &values, &progress);
}

HostTensor take_rows(const HostTensor& t, const std::vector<int64_t>& rows) {
  int64_t row_size = t.dims.empty() ? 1 : t.numel() / t.dims[0];
  HostTensor out{t.dtype, t.dims, {}};
  out.dims[0] = static_cast<int64_t>(rows.size());
  out.data.reserve(rows.size() * row_size);
  for (int64_t r : rows)
    out.data.insert(out.data.end(), t.data.begin() + r * row_size,
                    t.data.begin() + (r + 1) * row_size);
  return out;
}

}  // namespace mlpc::runtime
