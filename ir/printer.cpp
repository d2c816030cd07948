#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mlpc::ir {
namespace {

class Printer {
 public:
  explicit Printer(const Graph& g) : bs_(g.batch_symbol) {}

  std::string type(const TensorType& t) const { return to_string(t, bs_); }

  // Prints the non-input nodes of `g` at `indent`.
  void body(const Graph& g, int indent) {
    std::string pad(indent, ' ');
    for (const Node& n : g.nodes) {
      if (n.op == Op::Input) continue;
      out_ += pad;
      if (n.op == Op::Return) {
        out_ += "return " + operands(g, n) + "\n";
        continue;
      }
      out_ += fmt::format("%{} = {}", n.name, op_name(n.op));
      switch (n.op) {
        case Op::Param: out_ += " " + type(n.type) + "\n"; continue;
        case Op::FusedPointwise:
        case Op::FusedReduction:
        case Op::FusedMlp:
          out_ += fmt::format(" @{}({}){} : {} {{\n", n.symbol, operands(g, n), impl(n),
                              type(n.type));
          body(*n.body, indent + 2);
          out_ += pad + "}\n";
          continue;
        case Op::Scale:
        case Op::Slice:
        case Op::AddScalar:
        case Op::RmsNorm:
        case Op::LayerNorm: out_ += fmt::format(" {}, {}", operands(g, n), n.scalar); break;
        case Op::MatMul: out_ += " " + matmul(g, n); break;
        default: out_ += " " + operands(g, n); break;
      }
      out_ += " : " + type(n.type) + "\n";
    }
  }

  std::string operands(const Graph& g, const Node& n) const {
    std::string s;
    for (NodeId o : n.operands) s += fmt::format("{}%{}", s.empty() ? "" : ", ", g.node(o).name);
    return s;
  }

  // `%x, %w`, then the epilogue in the order it applies: `, bias %b, act relu, residual %r`.
  std::string matmul(const Graph& g, const Node& n) const {
    const GemmEpilogue& e = n.epilogue;
    auto name = [&](size_t i) { return "%" + g.node(n.operands.at(i)).name; };
    std::string s = name(0) + ", " + name(1);
    if (e.bias) s += ", bias " + name(2);
    if (e.act) s += fmt::format(", act {}", op_name(*e.act));
    if (e.residual) s += ", residual " + name(n.operands.size() - 1);
    if (n.impl != Impl::Auto) s += fmt::format(", impl {}", impl_name(n.impl));
    return s;
  }

  // A region's implementation, when one was selected: ` impl gated_wgmma`.
  static std::string impl(const Node& n) {
    return n.impl == Impl::Auto ? "" : fmt::format(" impl {}", impl_name(n.impl));
  }

  std::string out_;

 private:
  const std::string& bs_;
};

}  // namespace

std::string print(const Graph& g) {
  Printer p(g);
  std::string args;
  for (NodeId i : g.inputs())
    args += fmt::format("{}%{}: {}", args.empty() ? "" : ", ", g.node(i).name,
                        p.type(g.node(i).type));
  std::vector<std::string> results;
  for (NodeId o : g.outputs()) results.push_back(p.type(g.node(o).type));
  std::string result = results.size() == 1 ? results[0]
                                            : fmt::format("({})", fmt::join(results, ", "));
  p.out_ = fmt::format("func @{}({}) -> {} {{\n", g.name, args, result);
  p.body(g, 2);
  p.out_ += "}\n";
  return p.out_;
}

}  // namespace mlpc::ir
