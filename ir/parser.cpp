#include "ir/parser.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/lexer.h"
#include "ir/verifier.h"

namespace mlpc::ir {
namespace {

// Bounds on pathological (e.g. fuzzed) inputs.
constexpr size_t kMaxInputBytes = size_t{64} << 20;
constexpr size_t kMaxNodes = 1'000'000;

std::string loc_str(SourceLoc l) { return fmt::format("{}:{}", l.line, l.col); }

// The GEMM ops that named their epilogue before matmul carried it: still read (existing files,
// the fuzz corpus), as the matmul they meant, with their operands x, W and then the bias or the
// residual.
struct OldGemm {
  std::string_view name;
  GemmEpilogue epilogue;
};
const OldGemm kOldGemms[] = {
    {"matmul_bias", {.bias = true}},
    {"matmul_bias_relu", {.bias = true, .act = Op::Relu}},
    {"matmul_bias_gelu_tanh", {.bias = true, .act = Op::GeluTanh}},
    {"matmul_residual", {.residual = true}},
};

const OldGemm* old_gemm(std::string_view name) {
  for (const OldGemm& o : kOldGemms)
    if (o.name == name) return &o;
  return nullptr;
}

// A function body or a region: its own builder and names (regions are isolated from above).
// Names are views into the text, which outlives the parse.
struct Scope {
  Builder b;
  std::unordered_map<std::string_view, NodeId> names;
};

struct Operand {
  NodeId id;
  Token tok;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : lex_(text, file), file_(file) {
    tok_ = lex_.next();
  }

  Graph function();

 private:
  [[noreturn]] void fail(SourceLoc at, std::string_view msg) const { error_at(file_, at, msg); }
  Token advance() {
    Token t = tok_;
    tok_ = lex_.next();
    return t;
  }
  bool accept(Tok kind) {
    if (tok_.kind != kind) return false;
    advance();
    return true;
  }
  Token expect(Tok kind, std::string_view what) {
    if (tok_.kind != kind) fail(tok_.loc, fmt::format("expected {}, got {}", what, describe(tok_)));
    return advance();
  }
  // The graph's batch symbol: the one seen so far, else the default.
  std::string batch_symbol() const { return batch_.empty() ? Graph{}.batch_symbol : batch_; }
  std::string type_str(const TensorType& t) const { return to_string(t, batch_symbol()); }

  TensorType type();
  int64_t dim();
  Operand value(const Scope& s);
  std::vector<Operand> values(const Scope& s);
  std::vector<Operand> matmul_operands(const Scope& s, GemmEpilogue& e, Impl& impl);
  Impl impl_attribute();
  NodeId add(Scope& s, Node n, SourceLoc op_loc);
  void define(Scope& s, const Token& name, NodeId id);
  void check_fresh(const Scope& s, const Token& name) const;
  struct Returned {
    Token ret;
    std::vector<Operand> values;
  };
  Returned block(Scope& s, bool in_region, SourceLoc open);
  void statement(Scope& s, bool in_region);
  std::shared_ptr<const Graph> region(const Scope& outer, std::string_view symbol,
                                      const std::vector<Operand>& captured, SourceLoc open);

  Lexer lex_;
  std::string_view file_;
  Token tok_;
  std::string batch_;  // the batch symbol, once one has been seen
  std::string func_;
  size_t num_nodes_ = 0;
  Op region_op_ = Op::FusedPointwise;  // the fused op whose region is being parsed
};

int64_t Parser::dim() {
  if (tok_.kind == Tok::Ident) {
    Token t = advance();
    if (batch_.empty()) batch_ = t.text;
    if (t.text != batch_)
      fail(t.loc, fmt::format("batch dim '{}' differs from '{}' used before (a graph has one "
                              "symbolic batch dim)", t.text, batch_));
    return kBatchDim;
  }
  Token t = expect(Tok::Number, "a dim (a positive integer or the batch symbol)");
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  bool whole = end == t.text.data() + t.text.size();
  if (whole && (ec == std::errc::result_out_of_range || (ec == std::errc() && v > kMaxDim)))
    fail(t.loc, fmt::format("dim {} is too large (the limit is {})", t.text, kMaxDim));
  if (ec != std::errc() || !whole || v <= 0)
    fail(t.loc, fmt::format("invalid dim {}: dims are positive integers or the batch symbol",
                            describe(t)));
  return v;
}

TensorType Parser::type() {
  Token dt = expect(Tok::Ident, "a type such as f32[M, 768]");
  auto d = parse_dtype(dt.text);
  if (!d) fail(dt.loc, fmt::format("unknown dtype '{}'", dt.text));
  TensorType t{*d, {}};
  expect(Tok::LBracket, "'['");
  do t.shape.dims.push_back(dim());
  while (accept(Tok::Comma));
  expect(Tok::RBracket, "',' or ']'");
  return t;
}

Operand Parser::value(const Scope& s) {
  Token t = expect(Tok::Value, "a value (%name)");
  auto it = s.names.find(t.text.substr(1));
  if (it == s.names.end()) fail(t.loc, fmt::format("use of undefined value {}", t.text));
  return {it->second, t};
}

// Zero or more values separated by commas (the op's arity is checked by type inference).
std::vector<Operand> Parser::values(const Scope& s) {
  std::vector<Operand> out;
  if (tok_.kind != Tok::Value) return out;
  do out.push_back(value(s));
  while (accept(Tok::Comma));
  return out;
}

// `%x, %w` and the epilogue's attributes, each at most once and in any order:
// `, bias %b`, `, act relu`, `, residual %r`. Returns x, W, then the bias and the residual.
std::vector<Operand> Parser::matmul_operands(const Scope& s, GemmEpilogue& e, Impl& impl) {
  std::vector<Operand> out{value(s)};
  expect(Tok::Comma, "','");
  out.push_back(value(s));
  std::optional<Operand> bias, residual;
  while (accept(Tok::Comma)) {
    Token kw = expect(Tok::Ident,
                      "a matmul attribute (bias %b, act OP, residual %r or impl NAME)");
    auto once = [&](bool seen) {
      if (seen) fail(kw.loc, fmt::format("matmul has '{}' twice", kw.text));
    };
    if (kw.text == "bias") {
      once(e.bias);
      e.bias = true;
      bias = value(s);
    } else if (kw.text == "residual") {
      once(e.residual);
      e.residual = true;
      residual = value(s);
    } else if (kw.text == "act") {
      once(e.act.has_value());
      Token a = expect(Tok::Ident, "an activation (relu, gelu, gelu_tanh, silu, sigmoid, tanh)");
      auto act = parse_op(a.text);
      if (!act || !is_gemm_activation(*act))
        fail(a.loc, fmt::format("'{}' is not a matmul epilogue activation (relu, gelu, "
                                "gelu_tanh, silu, sigmoid, tanh)", a.text));
      e.act = act;
    } else if (kw.text == "impl") {
      once(impl != Impl::Auto);
      impl = impl_attribute();
    } else {
      fail(kw.loc, fmt::format("unknown matmul attribute {} (expected bias, act, residual or impl)",
                               describe(kw)));
    }
  }
  if (bias) out.push_back(*bias);
  if (residual) out.push_back(*residual);
  return out;
}

NodeId Parser::add(Scope& s, Node n, SourceLoc op_loc) {
  if (++num_nodes_ > kMaxNodes)
    fail(n.loc, fmt::format("too many nodes (the limit is {})", kMaxNodes));
  try {
    return s.b.add(std::move(n));
  } catch (const Error& e) {
    fail(op_loc, e.what());
  }
}

void Parser::check_fresh(const Scope& s, const Token& name) const {
  auto it = s.names.find(name.text.substr(1));
  if (it != s.names.end())
    fail(name.loc, fmt::format("value {} is defined twice (first at {})", name.text,
                               loc_str(s.b.graph().node(it->second).loc)));
}

void Parser::define(Scope& s, const Token& name, NodeId id) {
  s.names.emplace(name.text.substr(1), id);
}

// Statements up to and including `return` and the closing '}'.
Parser::Returned Parser::block(Scope& s, bool in_region, SourceLoc open) {
  std::string_view what = in_region ? "region" : "function body";
  auto unterminated = [&] {
    fail(open, fmt::format("unterminated {}: no closing '}}'", what));
  };
  for (;;) {
    if (tok_.kind == Tok::End) unterminated();
    if (tok_.kind == Tok::RBrace)
      fail(tok_.loc, in_region ? std::string("region has no return")
                            : fmt::format("missing return in function @{}", func_));
    if (tok_.kind == Tok::Ident && tok_.text == "return") break;
    statement(s, in_region);
  }
  Token ret = advance();
  std::vector<Operand> out;
  do out.push_back(value(s));
  while (accept(Tok::Comma));
  if (in_region && out.size() != 1)
    fail(ret.loc, fmt::format("a region returns exactly one value, got {}", out.size()));
  std::vector<NodeId> ids;
  for (const Operand& o : out) ids.push_back(o.id);
  add(s, Node{.op = Op::Return, .operands = std::move(ids), .loc = ret.loc}, ret.loc);
  if (tok_.kind == Tok::End) unterminated();
  expect(Tok::RBrace, fmt::format("'}}' after the {}'s return", what));
  return {ret, std::move(out)};
}

// The name after `impl`: one of ir/impl.h's.
Impl Parser::impl_attribute() {
  Token t = expect(Tok::Ident, "an implementation (cublaslt, simt, mma, gated_wgmma, ...)");
  auto impl = parse_impl(t.text);
  if (!impl || *impl == Impl::Auto)
    fail(t.loc, fmt::format("unknown implementation '{}' (expected cublaslt, cublaslt_xt, "
                            "cublaslt_xt_wt, tf32x3, simt, mma, gated_wgmma, gated_mma or "
                            "fused_mlp)",
                            t.text));
  return *impl;
}

void Parser::statement(Scope& s, bool in_region) {
  if (tok_.kind != Tok::Value)
    fail(tok_.loc, fmt::format("expected a statement ('%name = op ...' or 'return'), got {}",
                               describe(tok_)));
  Token name = advance();
  check_fresh(s, name);
  expect(Tok::Equal, "'='");
  Token op_tok = expect(Tok::Ident, "an op name");
  auto op = parse_op(op_tok.text);
  const OldGemm* old = old_gemm(op_tok.text);
  if (old) op = Op::MatMul;
  if (!op) fail(op_tok.loc, fmt::format("unknown op '{}'", op_tok.text));
  if (*op == Op::Input || *op == Op::Return)
    fail(op_tok.loc, *op == Op::Input ? "'input' is not a statement: inputs are function arguments"
                                      : "'return' does not define a value");
  if (in_region && region_op_ == Op::FusedReduction && !is_pointwise(*op) &&
      !is_reduction(*op))
    fail(op_tok.loc, is_fused(*op) ? std::string("fused regions cannot nest")
                                   : fmt::format("'{}' is not allowed in a fused.reduction region "
                                                 "(only pointwise ops and row reductions are)",
                                                 op_tok.text));
  if (in_region && region_op_ == Op::FusedMlp && *op != Op::MatMul)
    fail(op_tok.loc, is_fused(*op) ? std::string("fused regions cannot nest")
                                   : fmt::format("'{}' is not allowed in a fused.mlp region (only "
                                                 "matmuls are)", op_tok.text));
  if (in_region && region_op_ == Op::FusedPointwise && !is_pointwise(*op))
    fail(op_tok.loc, is_fused(*op)
                         ? std::string("fused.pointwise regions cannot nest")
                         : fmt::format("'{}' is not allowed in a fused.pointwise region (only "
                                       "pointwise ops are)", op_tok.text));

  Node n{.op = *op, .name = std::string(name.text.substr(1)), .loc = name.loc};
  std::vector<Operand> operands;
  if (is_fused(*op)) {
    n.symbol = expect(Tok::Symbol, "a kernel symbol (@name)").text.substr(1);
    expect(Tok::LParen, "'('");
    operands = values(s);
    expect(Tok::RParen, "',' or ')'");
    if (tok_.kind == Tok::Ident && tok_.text == "impl") {
      advance();
      n.impl = impl_attribute();
    }
  } else if (has_scalar(*op)) {  // the operands, then the scalar: `scale %x, 0.5`
    for (int k = 0; k < op_arity(*op); ++k) {
      operands.push_back(value(s));
      expect(Tok::Comma, "','");
    }
    Token num = expect(Tok::Number, "a number");
    auto [end, ec] = std::from_chars(num.text.data(), num.text.data() + num.text.size(), n.scalar);
    if (ec == std::errc::result_out_of_range)
      fail(num.loc, fmt::format("number {} is out of range", num.text));
    if (ec != std::errc() || end != num.text.data() + num.text.size())
      fail(num.loc, fmt::format("invalid number {}", describe(num)));
  } else if (old) {
    operands = values(s);
    if (operands.size() != 3)
      fail(op_tok.loc, fmt::format("'{}' takes 3 operands, got {}", old->name, operands.size()));
    n.epilogue = old->epilogue;
  } else if (*op == Op::MatMul) {
    operands = matmul_operands(s, n.epilogue, n.impl);
  } else if (*op != Op::Param) {
    operands = values(s);
  }
  if (*op != Op::Param) expect(Tok::Colon, "':'");
  SourceLoc type_loc = tok_.loc;
  TensorType declared = type();
  if (is_fused(*op)) {
    SourceLoc open = expect(Tok::LBrace, "'{'").loc;
    region_op_ = *op;
    n.body = region(s, n.symbol, operands, open);
  }
  for (const Operand& o : operands) n.operands.push_back(o.id);
  n.type = declared;
  NodeId id = add(s, std::move(n), op_tok.loc);
  const TensorType& inferred = s.b.type(id);
  if (!(inferred == declared))
    fail(type_loc, fmt::format("declared type {} does not match inferred type {}",
                               type_str(declared), type_str(inferred)));
  define(s, name, id);
}

std::shared_ptr<const Graph> Parser::region(const Scope& outer, std::string_view symbol,
                                            const std::vector<Operand>& captured,
                                            SourceLoc open) {
  Scope inner{Builder(std::string(symbol), batch_symbol()), {}};
  for (const Operand& o : captured) {
    auto it = inner.names.find(o.tok.text.substr(1));
    if (it != inner.names.end())
      fail(o.tok.loc, fmt::format("value {} is passed to the region twice", o.tok.text));
    const Node& src = outer.b.graph().node(o.id);
    NodeId id = add(inner, Node{.op = Op::Input, .name = src.name, .type = src.type,
                                .loc = o.tok.loc}, o.tok.loc);
    define(inner, o.tok, id);
  }
  block(inner, true, open);
  return std::make_shared<const Graph>(inner.b.finish());
}

Graph Parser::function() {
  Token kw = expect(Tok::Ident, "'func'");
  if (kw.text != "func") fail(kw.loc, fmt::format("expected 'func', got {}", describe(kw)));
  func_ = expect(Tok::Symbol, "a function name (@name)").text.substr(1);

  struct Arg {
    Token name;
    TensorType type;
  };
  std::vector<Arg> args;
  expect(Tok::LParen, "'('");
  if (tok_.kind != Tok::RParen) {
    do {
      Token a = expect(Tok::Value, "an argument (%name: type)");
      expect(Tok::Colon, "':'");
      args.push_back({a, type()});
    } while (accept(Tok::Comma));
  }
  expect(Tok::RParen, "',' or ')'");
  expect(Tok::Arrow, "'->'");
  std::vector<TensorType> results;
  if (accept(Tok::LParen)) {
    do results.push_back(type());
    while (accept(Tok::Comma));
    expect(Tok::RParen, "',' or ')'");
  } else {
    results.push_back(type());
  }
  SourceLoc open = expect(Tok::LBrace, "'{'").loc;

  // Only the signature can bring in the batch dim (later types derive from it; params cannot
  // have it), so the symbol is settled here.
  Scope s{Builder(func_, batch_symbol()), {}};
  for (const Arg& a : args) {
    check_fresh(s, a.name);
    Node n{.op = Op::Input, .name = std::string(a.name.text.substr(1)), .type = a.type,
           .loc = a.name.loc};
    define(s, a.name, add(s, std::move(n), a.name.loc));
  }
  auto [ret, outs] = block(s, false, open);
  if (outs.size() != results.size())
    fail(ret.loc, fmt::format("function @{} is declared to return {} value{}, but returns {}",
                              func_, results.size(), results.size() == 1 ? "" : "s",
                              outs.size()));
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorType& t = s.b.type(outs[i].id);
    if (!(t == results[i]))
      fail(outs[i].tok.loc, fmt::format("returned value {} is {}, but function @{} declares {}",
                                        outs[i].tok.text, type_str(t), func_,
                                        type_str(results[i])));
  }
  if (tok_.kind != Tok::End)
    fail(tok_.loc, fmt::format("trailing text after the function: {}", describe(tok_)));
  return s.b.finish();
}

}  // namespace

Graph parse(std::string_view text, std::string_view file) {
  if (text.size() > kMaxInputBytes)
    error_at(file, {1, 1}, fmt::format("input is {} bytes; the limit is {} bytes (64 MiB)",
                                       text.size(), kMaxInputBytes));
  Graph g = Parser(text, file).function();
  verify(g, file);
  return g;
}

Graph parse_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  auto cannot_read = [&] {
    int err = errno;
    throw Error(fmt::format("{}: error: cannot read file: {}", path, std::strerror(err)));
  };
  if (!f) cannot_read();
  // A regular file says its size: a giant one is refused before a byte of it is read.
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) > kMaxInputBytes)
    throw Error(fmt::format("{}: error: file is {} bytes; the limit is {} bytes (64 MiB)", path,
                            static_cast<uint64_t>(st.st_size), kMaxInputBytes));
  // Pipes and the like: read at most one byte past the limit, so a huge (or endless) stream is
  // rejected cheaply.
  std::string text;
  char buf[1 << 16];
  while (text.size() <= kMaxInputBytes) {
    size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) cannot_read();
  return parse(text, path);
}

}  // namespace mlpc::ir
