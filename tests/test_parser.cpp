// The .mlp text form: print -> parse -> print is exact, and every bad input gets one located line.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace mlpc::ir;

namespace {

TensorType ty(DType d, std::vector<int64_t> dims) { return {d, Shape{std::move(dims)}}; }
constexpr int64_t M = kBatchDim;

Graph geglu() {
  Builder b("geglu");
  NodeId x = b.input("x", ty(DType::BF16, {M, 768}));
  NodeId wg = b.param("w_gate", ty(DType::BF16, {3072, 768}));
  NodeId wu = b.param("w_up", ty(DType::BF16, {3072, 768}));
  NodeId wd = b.param("w_down", ty(DType::BF16, {768, 3072}));
  NodeId g = b.op(Op::MatMul, {x, wg}, "g");
  NodeId u = b.op(Op::MatMul, {x, wu}, "u");
  NodeId a = b.op(Op::GeluTanh, {g}, "a");
  NodeId h = b.op(Op::Mul, {a, u}, "h");
  b.ret({b.op(Op::MatMul, {h, wd}, "y")});
  return b.finish();
}

// Every unary op, scale factors that need care to print exactly, a cast, auto (numeric) names,
// a row-vector broadcast and a batch symbol other than M.
Graph unary_chain() {
  Builder b("unary", "B");
  NodeId x = b.input("x", ty(DType::F32, {M, 16}));
  NodeId bias = b.param("bias", ty(DType::F32, {16}));
  NodeId v = b.op(Op::Add, {x, bias});
  for (Op op : {Op::Relu, Op::Gelu, Op::GeluTanh, Op::Silu, Op::Sigmoid, Op::Tanh, Op::Exp,
                Op::Neg})
    v = b.op(op, {v});
  for (double s : {0.125, -1e-5, 3.0, 0.1, 1e300, -0.0}) v = b.op(Op::Scale, {v}, b.unique_name("s"), s);
  v = b.op(Op::Div, {b.op(Op::Sub, {v, x}), x});
  b.ret({b.cast(v, DType::BF16, "c")});
  return b.finish();
}

Graph fused() {
  Builder b("fused");
  NodeId x = b.input("x", ty(DType::BF16, {M, 64}));
  NodeId w = b.param("w", ty(DType::BF16, {64, 64}));
  NodeId g = b.op(Op::MatMul, {x, w}, "g");
  NodeId u = b.op(Op::MatMul, {x, w}, "u");
  Builder r("mlpc_fused_gelu_tanh_mul_0");
  NodeId rg = r.input("g", b.type(g));
  NodeId ru = r.input("u", b.type(u));
  // Inner names may reuse outer ones: a region is its own scope.
  r.ret({r.op(Op::Mul, {r.op(Op::GeluTanh, {rg}, "x"), ru}, "h")});
  NodeId h = b.add(Node{.op = Op::FusedPointwise,
                        .name = "h",
                        .operands = {g, u},
                        .symbol = "mlpc_fused_gelu_tanh_mul_0",
                        .body = std::make_shared<const Graph>(r.finish())});
  b.ret({b.op(Op::MatMul, {h, w}, "y")});
  return b.finish();
}

Graph multi_output() {
  Builder b("two");
  NodeId x = b.input("x", ty(DType::F32, {4, 8}));
  NodeId y = b.input("y", ty(DType::F32, {4, 8}));
  NodeId s = b.op(Op::Add, {x, y}, "sum");
  b.ret({s, b.cast(s, DType::F16, "half"), x});
  return b.finish();
}

std::string err(std::string_view text) {
  try {
    parse(text, "file.mlp");
  } catch (const mlpc::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A valid function around `body`, for the error tests: the body starts on line 2, column 3.
std::string in_func(std::string_view body) {
  return "func @f(%x: f32[M, 4], %w: f32[4, 4]) -> f32[M, 4] {\n" + std::string(body) + "\n}\n";
}

}  // namespace

TEST_CASE("geglu prints in the documented form", "[parser]") {
  CHECK(print(geglu()) ==
        "func @geglu(%x: bf16[M, 768]) -> bf16[M, 768] {\n"
        "  %w_gate = param bf16[3072, 768]\n"
        "  %w_up = param bf16[3072, 768]\n"
        "  %w_down = param bf16[768, 3072]\n"
        "  %g = matmul %x, %w_gate : bf16[M, 3072]\n"
        "  %u = matmul %x, %w_up : bf16[M, 3072]\n"
        "  %a = gelu_tanh %g : bf16[M, 3072]\n"
        "  %h = mul %a, %u : bf16[M, 3072]\n"
        "  %y = matmul %h, %w_down : bf16[M, 768]\n"
        "  return %y\n"
        "}\n");
}

TEST_CASE("print -> parse -> print is exact", "[parser]") {
  for (const Graph& g : {geglu(), unary_chain(), fused(), multi_output()}) {
    std::string text = print(g);
    INFO(text);
    Graph p = parse(text, "rt.mlp");
    CHECK(print(p) == text);
    CHECK(p.name == g.name);
    CHECK(p.batch_symbol == g.batch_symbol);
    REQUIRE(p.size() == g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      CHECK(p.nodes[i].op == g.nodes[i].op);
      CHECK(p.nodes[i].name == g.nodes[i].name);
      CHECK(p.nodes[i].type == g.nodes[i].type);
      CHECK(p.nodes[i].operands == g.nodes[i].operands);
      CHECK(p.nodes[i].scalar == g.nodes[i].scalar);
    }
  }
}

TEST_CASE("the region is parsed into a body graph", "[parser]") {
  Graph p = parse(print(fused()));
  const Node& h = p.nodes[4];
  REQUIRE(h.op == Op::FusedPointwise);
  CHECK(h.symbol == "mlpc_fused_gelu_tanh_mul_0");
  REQUIRE(h.body);
  CHECK(print(*h.body) == print(*fused().nodes[4].body));
  CHECK(h.body->node(h.body->inputs()[1]).name == "u");
}

TEST_CASE("hand-written text with comments and free layout", "[parser]") {
  Graph g = parse(
      "# GeGLU, spelled loosely\n"
      "func @geglu(%x: bf16[M,768])->bf16[M, 768]{  # trailing comment\n"
      "  %w_gate = param bf16[3072, 768]\n"
      "\t%w_up   = param bf16[ 3072 , 768 ]\n"
      "  %w_down = param bf16[768, 3072]\n"
      "  %g = matmul %x, %w_gate : bf16[M, 3072]\n"
      "  %u = matmul %x, %w_up   : bf16[M, 3072]\n"
      "\n"
      "  # the tanh approximation, as cuBLASLt's epilogue\n"
      "  %a = gelu_tanh %g       : bf16[M, 3072]\n"
      "  %h = mul %a,\n"
      "          %u              : bf16[M, 3072]\n"
      "  %y = matmul %h, %w_down : bf16[M, 768]\n"
      "  return %y\n"
      "}  # end\n",
      "geglu.mlp");
  CHECK(print(g) == print(geglu()));
  CHECK(g.nodes[0].loc.line == 2);
  CHECK(g.nodes[0].loc.col == 13);
  CHECK(g.nodes[2].loc.line == 4);
  CHECK(g.nodes[2].loc.col == 2);
  CHECK(g.nodes[6].loc.line == 10);
  CHECK(g.nodes[6].loc.col == 3);
  CHECK(g.return_node()->loc.line == 14);
}

TEST_CASE("scale accepts the usual spellings of a number", "[parser]") {
  for (auto [text, value] : std::vector<std::pair<std::string, double>>{
           {"2", 2.0}, {"-0.5", -0.5}, {"1e-05", 1e-5}, {"2.5E+3", 2500.0}, {".25", 0.25}}) {
    Graph g = parse(in_func("  %s = scale %x, " + text + " : f32[M, 4]\n  return %s"));
    CHECK(g.nodes[2].scalar == value);
  }
}

TEST_CASE("parse errors: tokens", "[parser]") {
  CHECK(err("func @f(%x f32[4]) -> f32[4] {\n  return %x\n}") ==
        "file.mlp:1:12: error: expected ':', got 'f32'");
  CHECK(err("fun @f() -> f32[4] {}") == "file.mlp:1:1: error: expected 'func', got 'fun'");
  CHECK(err("") == "file.mlp:1:1: error: expected 'func', got end of file");
  CHECK(err("func @f(%x: f32[4]) -> f32[4] {\n  return %x\n") ==
        "file.mlp:1:31: error: unterminated function body: no closing '}'");
  CHECK(err(in_func("  %y = relu $x : f32[M, 4]")) ==
        "file.mlp:2:13: error: unexpected character '$'");
  CHECK(err(in_func("  %y = relu %x : f32[M, 4]\x01")) ==
        "file.mlp:2:27: error: unexpected character '\\x01'");
  CHECK(err(in_func("  % = relu %x : f32[M, 4]")) ==
        "file.mlp:2:3: error: expected a name after '%'");
  CHECK(err(in_func("  relu %x")) ==
        "file.mlp:2:3: error: expected a statement ('%name = op ...' or 'return'), got 'relu'");
  CHECK(err(in_func("  %y = relu %x f32[M, 4]")) ==
        "file.mlp:2:16: error: expected ':', got 'f32'");
  std::string long_name = err(in_func("  %y = relu %" + std::string(100'000, 'a')));
  CHECK(long_name.size() < 400);
  CHECK_THAT(long_name, Catch::StartsWith("file.mlp:2:13: error: use of undefined value %aaa") &&
                            Catch::EndsWith("aaa..."));
}

TEST_CASE("parse errors: ops and values", "[parser]") {
  CHECK(err(in_func("  %y = foo %x : f32[M, 4]")) == "file.mlp:2:8: error: unknown op 'foo'");
  CHECK(err(in_func("  %y = relu %q : f32[M, 4]\n  return %y")) ==
        "file.mlp:2:13: error: use of undefined value %q");
  CHECK(err(in_func("  %y = relu %x : f32[M, 4]\n  %y = neg %x : f32[M, 4]")) ==
        "file.mlp:3:3: error: value %y is defined twice (first at 2:3)");
  CHECK(err("func @f(%x: f32[4], %x: f32[4]) -> f32[4] {\n  return %x\n}") ==
        "file.mlp:1:21: error: value %x is defined twice (first at 1:9)");
  CHECK(err(in_func("  %y = input f32[4]")) ==
        "file.mlp:2:8: error: 'input' is not a statement: inputs are function arguments");
  CHECK(err(in_func("  %y = return %x")) ==
        "file.mlp:2:8: error: 'return' does not define a value");
  CHECK(err(in_func("  %y = relu %x, %x : f32[M, 4]")) ==
        "file.mlp:2:8: error: node %y (relu %x: f32[M, 4], %x: f32[M, 4]): 'relu' takes 1 "
        "operand, got 2");
}

TEST_CASE("parse errors: types", "[parser]") {
  CHECK(err(in_func("  %y = cast %x : f64[M, 4]")) == "file.mlp:2:18: error: unknown dtype 'f64'");
  CHECK(err(in_func("  %y = relu %x : f32[M, 5]")) ==
        "file.mlp:2:18: error: declared type f32[M, 5] does not match inferred type f32[M, 4]");
  CHECK(err(in_func("  %y = matmul %w, %x : f32[4, 4]")) ==
        "file.mlp:2:8: error: node %y (matmul %w: f32[4, 4], %x: f32[M, 4]): matmul weight must "
        "be a static [N, K] matrix, got [M, 4]");
  CHECK(err(in_func("  %p = param f32[4, N]")) ==
        "file.mlp:2:21: error: batch dim 'N' differs from 'M' used before (a graph has one "
        "symbolic batch dim)");
  CHECK(err("func @f(%x: f32[4, M]) -> f32[4, M] {\n  return %x\n}") ==
        "file.mlp:1:9: error: node %x (input): only the leading dim may be the symbolic batch dim");
  CHECK(err(in_func("  %p = param f32[M, 4]")) ==
        "file.mlp:2:8: error: node %p (param): a param cannot have the symbolic batch dim");
  CHECK(err(in_func("  %p = param f32[]")) ==
        "file.mlp:2:18: error: expected a dim (a positive integer or the batch symbol), got ']'");
  CHECK(err(in_func("  %p = param f32[0]")) ==
        "file.mlp:2:18: error: invalid dim '0': dims are positive integers or the batch symbol");
  CHECK(err(in_func("  %p = param f32[1.5]")) ==
        "file.mlp:2:18: error: invalid dim '1.5': dims are positive integers or the batch "
        "symbol");
  CHECK(err(in_func("  %p = param f32[-3]")) ==
        "file.mlp:2:18: error: invalid dim '-3': dims are positive integers or the batch symbol");
  CHECK(err(in_func("  %p = param f32[1099511627777]")) ==
        "file.mlp:2:18: error: dim 1099511627777 is too large (the limit is 1099511627776)");
  CHECK(err(in_func("  %p = param f32[99999999999999999999999]")) ==
        "file.mlp:2:18: error: dim 99999999999999999999999 is too large (the limit is "
        "1099511627776)");
}

TEST_CASE("parse errors: scale factors", "[parser]") {
  CHECK(err(in_func("  %s = scale %x, 1e999 : f32[M, 4]")) ==
        "file.mlp:2:18: error: number 1e999 is out of range");
  CHECK(err(in_func("  %s = scale %x, 1.2.3 : f32[M, 4]")) ==
        "file.mlp:2:18: error: invalid number '1.2.3'");
  CHECK(err(in_func("  %s = scale %x, inf : f32[M, 4]")) ==
        "file.mlp:2:18: error: expected a number, got 'inf'");
  CHECK(err(in_func("  %s = scale %x : f32[M, 4]")) ==
        "file.mlp:2:17: error: expected ',', got ':'");
}

TEST_CASE("parse errors: function results", "[parser]") {
  CHECK(err(in_func("  %y = relu %x : f32[M, 4]")) ==
        "file.mlp:3:1: error: missing return in function @f");
  CHECK(err(in_func("  return")) == "file.mlp:3:1: error: expected a value (%name), got '}'");
  CHECK(err(in_func("  return %x, %x")) ==
        "file.mlp:2:3: error: function @f is declared to return 1 value, but returns 2");
  CHECK(err(in_func("  return %w")) ==
        "file.mlp:2:10: error: returned value %w is f32[4, 4], but function @f declares "
        "f32[M, 4]");
  CHECK(err(in_func("  return %x\n  %y = relu %x : f32[M, 4]")) ==
        "file.mlp:3:3: error: expected '}' after the function body's return, got '%y'");
  CHECK(err(in_func("  return %x") + "func") ==
        "file.mlp:4:1: error: trailing text after the function: 'func'");
}

TEST_CASE("parse errors: regions", "[parser]") {
  auto region = [](std::string_view inner) {
    return in_func("  %h = fused.pointwise @k(%x) : f32[M, 4] {\n" + std::string(inner) +
                   "\n  }\n  return %h");
  };
  CHECK(err(region("    %a = matmul %x, %x : f32[M, 4]\n    return %a")) ==
        "file.mlp:3:10: error: 'matmul' is not allowed in a fused.pointwise region (only "
        "pointwise ops are)");
  CHECK(err(region("    %a = fused.pointwise @j(%x) : f32[M, 4] {\n    return %x\n  }")) ==
        "file.mlp:3:10: error: fused.pointwise regions cannot nest");
  CHECK(err(region("    %a = relu %w : f32[4, 4]\n    return %a")) ==
        "file.mlp:3:15: error: use of undefined value %w");
  CHECK(err(region("    %a = relu %x : f32[M, 4]")) == "file.mlp:4:3: error: region has no return");
  CHECK(err(region("    return %x, %x")) ==
        "file.mlp:3:5: error: a region returns exactly one value, got 2");
  CHECK(err("func @f(%x: f32[4]) -> f32[4] {\n  %h = fused.pointwise @k(%x) : f32[4] {\n"
            "    return %x\n") == "file.mlp:2:40: error: unterminated region: no closing '}'");
  CHECK(err(in_func("  %h = fused.pointwise @k(%x, %x) : f32[M, 4] {\n    return %x\n  }")) ==
        "file.mlp:2:31: error: value %x is passed to the region twice");
  CHECK(err(region("    %x = relu %x : f32[M, 4]\n    return %x")) ==
        "file.mlp:3:5: error: value %x is defined twice (first at 2:27)");
  CHECK(err(region("    %a = neg %x : f32[M, 4]\n    %b = cast %a : f16[M, 4]\n    return %b")) ==
        "file.mlp:2:33: error: declared type f32[M, 4] does not match inferred type f16[M, 4]");
}

TEST_CASE("parse errors: size limits", "[parser]") {
  std::string huge((size_t{64} << 20) + 1, ' ');
  CHECK(err(huge) ==
        "file.mlp:1:1: error: input is 67108865 bytes; the limit is 67108864 bytes (64 MiB)");
  std::string many = "func @f(%x: f32[1]) -> f32[1] {\n";
  for (int i = 0; i < 1'000'000; ++i) many += fmt::format("%{} = neg %x : f32[1]\n", i);
  many += "return %x\n}\n";
  CHECK(err(many) == "file.mlp:1000001:1: error: too many nodes (the limit is 1000000)");
}

TEST_CASE("parse_file reads a file and names it in errors", "[parser]") {
  CHECK_THROWS_WITH(parse_file("/nonexistent/x.mlp"),
                    "/nonexistent/x.mlp: error: cannot read file: No such file or directory");
  CHECK_THROWS_WITH(parse_file("/"), "/: error: cannot read file: Is a directory");
  auto path = std::filesystem::temp_directory_path() / "mlpc_test_parser.mlp";
  std::ofstream(path) << print(geglu());
  CHECK(print(parse_file(path.string())) == print(geglu()));
  std::ofstream(path) << "func @f() -> f32[4] {\n  return %x\n}\n";
  CHECK_THROWS_WITH(parse_file(path.string()),
                    path.string() + ":2:10: error: use of undefined value %x");
  std::filesystem::remove(path);
}

// Cheap fuzzing: every prefix and many one-byte edits of valid text parse or throw mlpc::Error.
TEST_CASE("damaged text never crashes the parser", "[parser]") {
  std::string text = print(fused()) + print(unary_chain()).substr(0, 200);
  for (size_t n = 0; n <= text.size(); ++n) {
    try {
      parse(std::string_view(text).substr(0, n));
    } catch (const mlpc::Error&) {
    }
  }
  for (size_t i = 0; i < text.size(); ++i) {
    for (char c : {'\0', '%', '@', '{', '}', '(', ',', ':', '-', '9', 'M', '\n', '#'}) {
      std::string t = text;
      t[i] = c;
      try {
        parse(t);
      } catch (const mlpc::Error&) {
      }
    }
  }
}

TEST_CASE("a tensor too large to count is rejected at its declaration", "[parser]") {
  CHECK_THROWS_WITH(mlpc::ir::parse("func @f(%x: f32[M, 1048576, 1048576]) -> f32[M, 1048576, "
                                    "1048576] {\n  return %x\n}\n",
                                    "big.mlp"),
                    Catch::Contains("big.mlp:1:") && Catch::Contains("is too large"));
}
