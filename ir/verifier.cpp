#include "ir/verifier.h"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <unordered_map>

#include "ir/error.h"
#include "ir/infer.h"
#include "ir/mlp_chain.h"
#include "ir/row_space.h"

namespace mlpc::ir {
namespace {

// What the lexer accepts after '%' and '@': names outside it would print but not parse back.
bool is_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.'))
      return false;
  return true;
}

// The batch symbol is printed as a bare dim, so it must not look like a number.
bool is_ident(std::string_view s) {
  return is_name(s) && !(s[0] >= '0' && s[0] <= '9') && s[0] != '.';
}

class Verifier {
 public:
  explicit Verifier(std::string_view file) : file_(file) {}

  // `region` is the kernel symbol when `g` is the body of a fused.pointwise node.
  void graph(const Graph& g, const std::string* region) {
    if (!region && !is_name(g.name))
      fail_graph(fmt::format("function name '{}' is not [A-Za-z0-9_.]+", g.name));
    if (!region && !is_ident(g.batch_symbol))
      fail_graph(fmt::format("batch symbol '{}' is not an identifier", g.batch_symbol));
    std::unordered_map<std::string_view, uint32_t> names;
    names.reserve(g.size());
    bool past_inputs = false;
    for (uint32_t i = 0; i < g.size(); ++i) {
      const Node& n = g.nodes[i];
      if (n.op != Op::Return) {
        if (n.name.empty()) fail_node(g, i, region, "has no name");
        if (!is_name(n.name)) fail_node(g, i, region, "name is not [A-Za-z0-9_.]+");
        auto [it, fresh] = names.emplace(n.name, i);
        if (!fresh)
          fail_node(g, i, region, fmt::format("value %{} is defined twice (first by node #{})",
                                              n.name, it->second));
      }
      if (n.op == Op::Input && past_inputs)
        fail_node(g, i, region,
                  "inputs must come before all other nodes (they are the function's arguments)");
      past_inputs |= n.op != Op::Input;
      node(g, i, region);
    }
    if (!g.return_node())
      fail_graph(region ? fmt::format("region @{} has no return", *region)
                        : fmt::format("function @{} has no return", g.name));
  }

 private:
  // Operands, arity, region, scalar and type of node `i`.
  void node(const Graph& g, uint32_t i, const std::string* region) {
    const Node& n = g.nodes[i];
    auto fail = [&](std::string_view msg) { fail_node(g, i, region, msg); };
    std::vector<TensorType> in;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      uint32_t o = n.operands[k].index;
      if (o >= g.size())
        fail(fmt::format("operand {} refers to node #{}, which does not exist", k, o));
      if (o >= i)
        fail(fmt::format("operand {} (%{}) is defined after its use", k, g.nodes[o].name));
      in.push_back(g.nodes[o].type);
    }
    int arity = op_arity(n.op);
    if (arity >= 0 && static_cast<int>(n.operands.size()) != arity)
      fail(fmt::format("takes {} operand{}, got {}", arity, arity == 1 ? "" : "s",
                       n.operands.size()));
    if (region && region_op_ == Op::FusedReduction)
      if (!(n.op == Op::Input || n.op == Op::Return || is_pointwise(n.op) || is_reduction(n.op)))
        fail("only pointwise ops and row reductions may appear in a fused.reduction region");
    if (region && region_op_ == Op::FusedMlp &&
        !(n.op == Op::Input || n.op == Op::Return || n.op == Op::MatMul))
      fail("only matmuls may appear in a fused.mlp region");
    if (region && region_op_ == Op::FusedPointwise &&
        !(n.op == Op::Input || n.op == Op::Return || is_pointwise(n.op)))
      fail("only pointwise ops may appear in a fused.pointwise region");
    if (is_fused(n.op)) {
      if (n.symbol.empty()) fail("has no kernel symbol");
      // The symbol is the CUDA kernel's name (NVRTC compiles it, the executor finds it by it):
      // a C identifier, one per kernel. The pipeline fuzzer found "@000k…" reaching codegen.
      if (!is_c_identifier(n.symbol))
        fail(fmt::format("kernel symbol '{}' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)",
                         n.symbol));
      if (auto [it, fresh] = symbols_.emplace(n.symbol, n.name); !fresh)
        fail(fmt::format("kernel symbol @{} is also the kernel of %{}", n.symbol, it->second));
      if (!n.body) fail("has no region");
      region_op_ = n.op;
      graph(*n.body, &n.symbol);  // depth 1: a region holding a fused node was rejected above
      if (n.op == Op::FusedReduction)
        if (std::string why = row_space_error(*n.body); !why.empty()) fail(why);
      if (std::string why; n.op == Op::FusedMlp && mlp_chain_layers(*n.body, &why).empty())
        fail(why);
    } else if (n.body || !n.symbol.empty()) {
      fail("only fused regions have a region and a kernel symbol");
    }
    if (std::string why = impl_error(n); !why.empty()) fail(why);
    if (n.op == Op::Scale && !std::isfinite(n.scalar))
      fail(fmt::format("scale factor must be finite, got {}", n.scalar));
    if (n.op == Op::AddScalar && !std::isfinite(n.scalar))
      fail(fmt::format("add_scalar constant must be finite, got {}", n.scalar));
    if ((n.op == Op::RmsNorm || n.op == Op::LayerNorm) &&
        !(std::isfinite(n.scalar) && n.scalar >= 0))
      fail(fmt::format("eps must be finite and >= 0, got {}", n.scalar));
    Inferred r = infer_type(n.op, in, n.type, n.body.get(), n.epilogue);
    if (!r.error.empty()) fail(r.error);
    if (n.op == Op::Slice && region && g.node(n.operands[0]).op != Op::Input)
      fail(fmt::format("slice of %{}, which the region computes: in a region a slice reads "
                       "columns of one of the region's operands", g.node(n.operands[0]).name));
    if (n.op == Op::Slice) {
      const double width = static_cast<double>(n.type.shape.last());
      const double avail = static_cast<double>(g.node(n.operands[0]).type.shape.last());
      if (!(n.scalar >= 0 && n.scalar == std::floor(n.scalar) && n.scalar + width <= avail))
        fail(fmt::format("slice offset {} must be a whole number in [0, {}]", n.scalar,
                         avail - width));
    }
    if (n.op == Op::Concat)
      for (NodeId o : n.operands) {
        if (g.node(o).op != Op::Param)
          fail(fmt::format("concat operand %{} is not a param: concat lays params out once, at "
                           "load time", g.node(o).name));
        else if (!concat_members_.insert(&g.node(o)).second)
          fail(fmt::format("param %{} is already in a concat (each param is laid out once)",
                           g.node(o).name));
      }
    if (n.op != Op::Return && !(r.type == n.type))
      fail(fmt::format("type {} does not match the inferred type {}",
                       to_string(n.type, g.batch_symbol), to_string(r.type, g.batch_symbol)));
    if (is_fused(n.op)) region_names(g, i, region);
    if (n.op == Op::Return && i + 1 != g.size()) fail("the return must be the last node");
  }

  // What is wrong with node `n`'s implementation (ir/impl.h), or "": only matmuls and
  // fused.pointwise regions (a gated kernel's combine) have one, and each suits its dtype.
  static std::string impl_error(const Node& n) {
    if (n.impl == Impl::Auto) return {};
    const std::string_view name = impl_name(n.impl);
    if (n.op == Op::FusedPointwise)
      return is_gated(n.impl) ? std::string()
                              : fmt::format("a fused.pointwise region's impl is gated_wgmma or "
                                            "gated_mma, not {}", name);
    if (n.op == Op::FusedMlp)
      return n.impl == Impl::FusedMlp
                 ? std::string()
                 : fmt::format("a fused.mlp region's impl is fused_mlp, not {}", name);
    if (n.op != Op::MatMul) return fmt::format("only a matmul or a region has an impl ({})", name);
    const bool f32 = n.type.dtype == DType::F32;
    const bool f32_only = n.impl == Impl::CublasltXt || n.impl == Impl::CublasltXtWt ||
                          n.impl == Impl::Tf32x3;
    const bool half_only = n.impl == Impl::Mma || is_gated(n.impl);
    if ((f32_only && !f32) || (half_only && f32))
      return fmt::format("impl {} does not run {} GEMMs", name, dtype_name(n.type.dtype));
    return {};
  }

  // The printer does not spell a region's inputs: the parser names them after the operands.
  void region_names(const Graph& g, uint32_t i, const std::string* region) {
    const Node& n = g.nodes[i];
    auto ins = n.body->inputs();
    for (size_t k = 0; k < ins.size(); ++k) {
      const std::string& inner = n.body->node(ins[k]).name;
      const std::string& outer = g.node(n.operands[k]).name;
      if (inner != outer)
        fail_node(g, i, region, fmt::format("region input %{} must be named after operand %{} "
                                            "(the text form relies on it)", inner, outer));
    }
  }

  [[noreturn]] void fail_node(const Graph& g, uint32_t i, const std::string* region,
                              std::string_view msg) const {
    const Node& n = g.nodes[i];
    std::string prefix;
    if (!file_.empty() && n.loc.line > 0)
      prefix = fmt::format("{}:{}:{}: error: ", file_, n.loc.line, n.loc.col);
    std::string who = n.name.empty() ? fmt::format("#{}", i) : fmt::format("%{}", n.name);
    std::string where = region ? fmt::format(" in region @{}", *region) : "";
    throw Error(fmt::format("{}node {} ({}){}: {}", prefix, who, op_name(n.op), where, msg));
  }

  [[noreturn]] void fail_graph(std::string_view msg) const {
    throw Error(file_.empty() ? std::string(msg) : fmt::format("{}: error: {}", file_, msg));
  }

  std::string_view file_;
  Op region_op_ = Op::FusedPointwise;  // the fused op whose region is being verified
  std::unordered_map<std::string, std::string> symbols_;  // kernel symbol -> the fused value
  std::set<const Node*> concat_members_;  // params already stacked by a concat
};

}  // namespace

void verify(const Graph& g, std::string_view file) { Verifier(file).graph(g, nullptr); }

bool is_c_identifier(std::string_view s) {
  return is_ident(s) && s.find('.') == std::string_view::npos;
}

}  // namespace mlpc::ir
