#include "passes/expand_composites.h"

#include <fmt/format.h>

#include <unordered_set>

#include "ir/error.h"
#include "passes/rebuild.h"

namespace mlpc::passes {
namespace {

using ir::DType;
using ir::NodeId;
using ir::Op;

// Adds the primitives of one composite node to `b`, named after it: %n.f32, %n.mean, ...
class Expander {
 public:
  Expander(ir::Builder& b, const ir::Node& n, const std::unordered_set<std::string>& taken)
      : b_(b), n_(n), taken_(taken) {}

  NodeId run(const std::vector<NodeId>& in) {
    const DType dt = n_.type.dtype;
    NodeId x = f32(in[0], "f32");
    NodeId y;
    switch (n_.op) {
      case Op::RmsNorm: {
        NodeId ms = op(Op::ReduceMean, {op(Op::Square, {x}, "sq")}, "ms");
        NodeId rstd = op(Op::Rsqrt, {op(Op::AddScalar, {ms}, "ms_eps", n_.scalar)}, "rstd");
        y = op(Op::Mul, {op(Op::Mul, {x, rstd}, "normed"), f32(in[1], "weight")}, "scaled");
        break;
      }
      case Op::LayerNorm: {
        NodeId mean = op(Op::ReduceMean, {x}, "mean");
        NodeId d = op(Op::Sub, {x, mean}, "centered");
        // Two passes: the variance of the centered row, never E[x^2] - E[x]^2.
        NodeId var = op(Op::ReduceMean, {op(Op::Square, {d}, "sq")}, "var");
        NodeId rstd = op(Op::Rsqrt, {op(Op::AddScalar, {var}, "var_eps", n_.scalar)}, "rstd");
        NodeId s = op(Op::Mul, {op(Op::Mul, {d, rstd}, "normed"), f32(in[1], "weight")}, "scaled");
        y = op(Op::Add, {s, f32(in[2], "bias")}, "shifted");
        break;
      }
      case Op::Softmax: {
        NodeId max = op(Op::ReduceMax, {x}, "max");
        NodeId e = op(Op::Exp, {op(Op::Sub, {x, max}, "centered")}, "exp");
        y = op(Op::Div, {e, op(Op::ReduceSum, {e}, "sum")}, "probs");
        break;
      }
      default: MLPC_ASSERT(false, fmt::format("no expansion for '{}'", ir::op_name(n_.op)));
    }
    if (dt == DType::F32) {
      b_.rename(y, n_.name);
      return y;
    }
    return b_.cast(y, dt, n_.name);
  }

 private:
  std::string name(const char* part) {
    std::string hint = fmt::format("{}.{}", n_.name, part);
    std::string s = hint;
    for (int k = 1; taken_.count(s) || b_.unique_name(s) != s; ++k)
      s = fmt::format("{}_{}", hint, k);
    return s;
  }
  NodeId op(Op o, std::vector<NodeId> in, const char* part, double scalar = 0.0) {
    return b_.op(o, std::move(in), name(part), scalar);
  }
  // fp32 statistics, as torch's norms compute them; no cast when x already is f32.
  NodeId f32(NodeId v, const char* part) {
    return b_.type(v).dtype == DType::F32 ? v : b_.cast(v, DType::F32, name(part));
  }

  ir::Builder& b_;
  const ir::Node& n_;
  const std::unordered_set<std::string>& taken_;
};

}  // namespace

bool expand_composites(ir::Graph& g) {
  bool any = false;
  for (const ir::Node& n : g.nodes) any |= ir::op_kind(n.op) == ir::OpKind::Composite;
  if (!any) return false;
  std::unordered_set<std::string> taken;  // names defined anywhere, later nodes included
  for (const ir::Node& n : g.nodes) taken.insert(n.name);
  Rebuild r(g);
  for (const ir::Node& n : g.nodes) {
    if (ir::op_kind(n.op) != ir::OpKind::Composite) {
      r.copy(n);
      continue;
    }
    std::vector<NodeId> in;
    for (NodeId o : n.operands) in.push_back(r.mapped(o));
    r.alias(g.id_of(n), Expander(r.builder(), n, taken).run(in));
  }
  g = r.finish();
  return true;
}

}  // namespace mlpc::passes
