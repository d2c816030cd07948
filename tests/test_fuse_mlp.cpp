// Whole MLPs in one kernel (passes/fuse_mlp.h, codegen/fused_mlp_plan.h): golden IR of the
// fused.mlp region selection makes, what the chain finder takes and where it stops (with its
// reasons), the region's text form and errors, its plan (one launch) and its meaning (the
// reference computes the same with it as without it).
#include <catch2/catch.hpp>

#include "codegen/candidates.h"
#include "codegen/fused_mlp_plan.h"
#include "codegen/plan_builder.h"
#include "compiler/compile.h"
#include "compiler/levels.h"
#include "error_of.h"
#include "fused_mlp_test_util.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "pass_test_util.h"
#include "passes/fuse_mlp.h"
#include "passes/select_kernels.h"
#include "runtime/reference/reference.h"

using mlpc::test::dedent;
using namespace mlpc;

namespace {

constexpr const char* kTcnn = R"(
func @tcnn(%x: f16[M, 64]) -> f16[M, 16] {
  %w1 = param f16[64, 64]
  %w2 = param f16[64, 64]
  %w3 = param f16[16, 64]
  %h1 = matmul %x, %w1, act relu : f16[M, 64]
  %h2 = matmul %h1, %w2, act relu : f16[M, 64]
  %y = matmul %h2, %w3 : f16[M, 16]
  return %y
}
)";

// `g` after selection with every fused-MLP candidate taken (--fused-mlp on) and fuse-mlp.
std::string fused(ir::Graph& g, std::vector<passes::KernelRecord>* records = nullptr,
                  const std::string& arch = "sm_90") {
  std::vector<passes::KernelCandidate> cands;
  for (const codegen::CandidateFragments& c : codegen::enumerate_candidates(g))
    cands.push_back(c.candidate);
  passes::select_kernels(g, cands, {.fused_mlps = passes::FusedMlps::On, .arch = arch}, records);
  passes::fuse_mlp(g);
  ir::verify(g);
  return ir::print(g);
}

// What each chain of `text` takes and where it stops: "h1,h2: <stop>" per chain.
std::vector<std::string> chains(const std::string& text) {
  const ir::Graph g = ir::parse(text, "chains.mlp");
  std::vector<std::string> out;
  for (const passes::MlpChain& c : passes::find_mlp_chains(g)) {
    std::string s;
    for (const passes::MlpLayer& l : c.layers) s += (s.empty() ? "" : ",") + g.node(l.output).name;
    out.push_back(s + ": " + c.stop);
  }
  return out;
}

}  // namespace

TEST_CASE("fuse-mlp: a chain of narrow layers becomes one fused.mlp region", "[fuse_mlp]") {
  ir::Graph g = ir::parse(kTcnn, "tcnn.mlp");
  std::vector<passes::KernelRecord> records;
  const std::string got = fused(g, &records);
  CHECK(got == dedent(R"(
    func @tcnn(%x: f16[M, 64]) -> f16[M, 16] {
      %w1 = param f16[64, 64]
      %w2 = param f16[64, 64]
      %w3 = param f16[16, 64]
      %y = fused.mlp @mlpc_fused_mlp_y(%x, %w1, %w2, %w3) impl fused_mlp : f16[M, 16] {
        %h1 = matmul %x, %w1, act relu : f16[M, 64]
        %h2 = matmul %h1, %w2, act relu : f16[M, 64]
        %y = matmul %h2, %w3 : f16[M, 16]
        return %y
      }
      return %y
    }
  )"));
  // The text form parses back to the same graph.
  CHECK(ir::print(ir::parse(got, "tcnn.mlp")) == got);
  REQUIRE(records.size() == 1);
  CHECK(records[0].kind == passes::ChoiceKind::FusedMlp);
  CHECK(records[0].taken);
  CHECK(records[0].why ==
        "one kernel (--fused-mlp on); 3 layers, %h1 to %y; stops: %y is a graph output");

  // One launch: the tensor-core kernel over x and the three weights, recorded in the plan.
  const codegen::Plan plan = codegen::build_plan(g, {.records = &records});
  REQUIRE(plan.steps.size() == 1);
  const auto& k = std::get<codegen::KernelStep>(plan.steps[0]);
  CHECK(k.as<codegen::FusedMlpMma>());
  CHECK(k.name == "mlpc_fused_mlp_y");
  REQUIRE(k.inputs.size() == 4);
  CHECK(plan.buffers[k.inputs[0]].name == "x");
  CHECK(plan.buffers[k.inputs[3]].name == "w3");
  CHECK(plan.buffers[k.output].name == "y");
  REQUIRE(plan.choices.size() == 1);
  CHECK(plan.choices[0].taken);
  CHECK(plan.choices[0].step == "mlpc_fused_mlp_y");
}

TEST_CASE("fuse-mlp: where a chain stops, and why", "[fuse_mlp]") {
  // A hidden value with a second reader ends its chain; the next chain starts after it.
  CHECK(chains(R"(
    func @f(%x: f16[M, 64]) -> (f16[M, 16], f16[M, 64]) {
      %w1 = param f16[64, 64]
      %w2 = param f16[64, 64]
      %w3 = param f16[64, 64]
      %w4 = param f16[16, 64]
      %h1 = matmul %x, %w1, act relu : f16[M, 64]
      %h2 = matmul %h1, %w2, act relu : f16[M, 64]
      %h3 = matmul %h2, %w3, act relu : f16[M, 64]
      %y = matmul %h3, %w4 : f16[M, 16]
      return %y, %h2
    }
  )") == std::vector<std::string>{
             "h1,h2: %h2 has 2 readers: a hidden layer must feed only the next",
             "h3,y: %y is a graph output"});
  // A pointwise kernel finishing a layer's epilogue (silu: cuBLASLt has none) is part of the
  // layer; one that is no epilogue (exp) ends the chain, and so does a residual of another value.
  const std::string between = R"(
    func @f(%x: f16[M, 64], %r: f16[M, 64]) -> f16[M, 64] {
      %w1 = param f16[64, 64]
      %w2 = param f16[64, 64]
      %w3 = param f16[64, 64]
      %w4 = param f16[64, 64]
      %b2 = param f16[64]
      %h1 = matmul %x, %w1, act relu : f16[M, 64]
      %h2 = matmul %h1, %w2 : f16[M, 64]
      %e = fused.pointwise @k(%h2, %b2) : f16[M, 64] {
        %a = add %h2, %b2 : f16[M, 64]
        %s = OP %a : f16[M, 64]
        return %s
      }
      %h3 = matmul %e, %w3 : f16[M, 64]
      %y = matmul %h3, %w4, residual %r : f16[M, 64]
      return %y
    }
  )";
  auto with = [&](const std::string& op) {
    std::string t = between;
    return t.replace(t.find("OP"), 2, op);
  };
  CHECK(chains(with("silu")) ==
        std::vector<std::string>{"h1,e,h3: %y adds %r, not the chain's x"});
  CHECK(chains(with("exp")) == std::vector<std::string>{
                                   "h1,h2: %h2 is read by %e (fused.pointwise), not as a matmul's x"});
  // The candidate replaces every step of its layers, the tail region's kernel included.
  for (const codegen::CandidateFragments& c :
       codegen::enumerate_candidates(ir::parse(with("silu"), "f.mlp")))
    if (c.candidate.kind == passes::ChoiceKind::FusedMlp) {
      CHECK(c.baseline.steps.size() == 4);  // three GEMMs and the silu kernel
      REQUIRE(c.options.size() == 1);
      CHECK(c.options[0].steps.size() == 1);
    }
  // The silu layer in the region: one matmul with its bias and activation, named as its output.
  ir::Graph g = ir::parse(with("silu"), "f.mlp");
  const std::string got = fused(g);
  CHECK(mlpc::test::count(got, "%e = matmul %h1, %w2, bias %b2, act silu : f16[M, 64]") == 1);
  CHECK(mlpc::test::count(got, "%h3 = fused.mlp @mlpc_fused_mlp_h3(%x, %w1, %w2, %b2, %w3)") == 1);
  // A residual of the chain's own x is the chain's last layer.
  CHECK(chains(R"(
    func @f(%x: f16[M, 64]) -> f16[M, 64] {
      %w1 = param f16[64, 64]
      %w2 = param f16[64, 64]
      %h1 = matmul %x, %w1, act gelu_tanh : f16[M, 64]
      %y = matmul %h1, %w2, residual %x : f16[M, 64]
      return %y
    }
  )") == std::vector<std::string>{"h1,y: %y adds a residual"});
}

TEST_CASE("fuse-mlp: what the kernel refuses is cut off, and the record says why", "[fuse_mlp]") {
  // 256 wide is past the tensor-core kernel's 128: the layers on either side of that value
  // cannot be one kernel, the last two can.
  ir::Graph g = ir::parse(R"(
    func @f(%x: f16[M, 64]) -> f16[M, 16] {
      %w1 = param f16[256, 64]
      %w2 = param f16[64, 256]
      %w3 = param f16[64, 64]
      %w4 = param f16[16, 64]
      %h1 = matmul %x, %w1, act relu : f16[M, 256]
      %h2 = matmul %h1, %w2, act relu : f16[M, 64]
      %h3 = matmul %h2, %w3, act relu : f16[M, 64]
      %y = matmul %h3, %w4 : f16[M, 16]
      return %y
    }
  )", "f.mlp");
  std::vector<passes::KernelRecord> records;
  const std::string got = fused(g, &records);
  CHECK(mlpc::test::count(got, "fused.mlp") == 1);
  CHECK(mlpc::test::count(got, "%h1 = matmul %x, %w1, act relu, impl cublaslt") == 1);
  // From %h1 and from %h2 the 256-wide value is in the way; from %h3 the rest is one kernel.
  REQUIRE(records.size() == 3);
  CHECK_FALSE(records[0].taken);
  CHECK(records[0].why ==
        "layer by layer: %h1 and %h2: the kernel refuses them: width 256 exceeds 128: a thread "
        "holds width / 2 fp32 accumulators per 16 rows, and wider layers would spill registers");
  CHECK_FALSE(records[1].taken);
  CHECK(records[1].why.rfind("layer by layer: %h2 and %h3: the kernel refuses them: ", 0) == 0);
  CHECK(records[2].taken);
  CHECK(records[2].why == "one kernel (--fused-mlp on); 2 layers, %h3 to %y; stops: %y is a "
                          "graph output");
  CHECK(mlpc::test::count(got, "%y = fused.mlp @mlpc_fused_mlp_y(%h2, %w3, %w4)") == 1);
}

TEST_CASE("fuse-mlp: f32 chains take the CUDA-core cluster kernel, on sm_90 only", "[fuse_mlp]") {
  CompileOptions o = options_for_level(2, {.fused_mlp = "on"});
  o.arch = "sm_90";
  o.build_kernels = false;
  o.measure_epilogues = false;
  o.decide_rows = 64;
  const ir::Graph sample = testing::mlp_graph(testing::mlp3_small_spec());
  const CompiledGraph c = compile(sample, o);
  REQUIRE(c.pipeline.passes.back().pass == "fuse-mlp");
  CHECK(mlpc::test::count(c.pipeline.passes.back().ir, "fused.mlp @mlpc_fused_mlp_y") == 1);
  REQUIRE(c.plan.steps.size() == 1);
  CHECK(std::get<codegen::KernelStep>(c.plan.steps[0]).as<codegen::FusedMlpSimt>());

  // sm_80 has no clusters: the layers stay apart, and the record says so.
  o.arch = "sm_80";
  const CompiledGraph apart = compile(sample, o);
  CHECK(mlpc::test::count(apart.pipeline.passes.back().ir, "fused.mlp") == 0);
  CHECK(apart.plan.steps.size() == 3);
  REQUIRE_FALSE(apart.plan.choices.empty());
  CHECK(apart.plan.choices[0].why.rfind("layer by layer: the f32 kernel does not run on sm_80",
                                        0) == 0);
}

TEST_CASE("fuse-mlp: the region computes what its layers compute", "[fuse_mlp]") {
  for (const codegen::FusedMlpSpec& spec :
       {testing::mlp_spec(ir::DType::F16, 64, {64, 64, 64, 64, 64, 16}, ir::Op::Relu),
        testing::mlp_spec(ir::DType::BF16, 64, {128, 64, 16}, ir::Op::GeluTanh, /*bias=*/true),
        testing::mlp_spec(ir::DType::F16, 64, {128, 64}, ir::Op::GeluTanh, true,
                          /*residual=*/true),
        // silu and exact gelu: no cuBLASLt epilogue, so each layer is a GEMM with its bias and
        // a pointwise kernel for the activation, which the region takes in.
        testing::mlp_spec(ir::DType::F16, 64, {64, 64, 16}, ir::Op::Silu, true),
        testing::mlp_spec(ir::DType::BF16, 32, {64, 32}, ir::Op::Gelu, false, /*residual=*/true),
        testing::mlp3_small_spec()}) {
    CAPTURE(testing::mlp_text(spec));
    CompileOptions o = options_for_level(2, {.fused_mlp = "on"});
    o.arch = "sm_90";
    o.build_kernels = false;
    o.measure_epilogues = false;
    const ir::Graph g = testing::mlp_graph(spec);
    const CompiledGraph c = compile(g, o);
    CHECK(mlpc::test::count(c.pipeline.passes.back().ir, "= fused.mlp") == 1);
    CHECK(c.plan.steps.size() == 1);
    const Values v = testing::mlp_values(spec, 37, 5);
    const runtime::HostTensor want = runtime::reference_forward(g, v).at(0);
    const runtime::HostTensor got = runtime::reference_forward(c.pipeline.graph, v).at(0);
    CHECK(got.data == want.data);
  }
}

TEST_CASE("fused.mlp regions: every error of the text form", "[fuse_mlp][parser]") {
  auto error = [](const std::string& body, const std::string& impl = " impl fused_mlp") {
    return mlpc::test::error_of([&] {
      ir::verify(ir::parse("func @f(%x: f16[M, 64]) -> f16[M, 64] {\n"
                           "  %w1 = param f16[64, 64]\n  %w2 = param f16[64, 64]\n"
                           "  %y = fused.mlp @k(%x, %w1, %w2)" + impl + " : f16[M, 64] {\n" +
                               body + "    return %y\n  }\n  return %y\n}\n",
                           "f.mlp"));
    });
  };
  CHECK(error("    %h = matmul %x, %w1 : f16[M, 64]\n    %y = relu %h : f16[M, 64]\n") ==
        "f.mlp:6:10: error: 'relu' is not allowed in a fused.mlp region (only matmuls are)");
  CHECK(error("    %h = matmul %x, %w1 : f16[M, 64]\n    %y = matmul %x, %w2 : f16[M, 64]\n")
            .find("%y reads %x, not %h: a fused.mlp region is a chain") != std::string::npos);
  CHECK(error("    %h = matmul %x, %w1 : f16[M, 64]\n"
              "    %y = matmul %h, %w2, residual %h : f16[M, 64]\n")
            .find("%y's residual is %h: a fused.mlp region adds only x") != std::string::npos);
  // x as a later layer's weight (a static x: the only way its shape fits).
  CHECK(mlpc::test::error_of([] {
          ir::verify(ir::parse("func @f(%x: f16[64, 64]) -> f16[64, 64] {\n"
                               "  %w1 = param f16[64, 64]\n"
                               "  %y = fused.mlp @k(%x, %w1) impl fused_mlp : f16[64, 64] {\n"
                               "    %h = matmul %x, %w1 : f16[64, 64]\n"
                               "    %y = matmul %h, %x : f16[64, 64]\n"
                               "    return %y\n  }\n  return %y\n}\n",
                               "f.mlp"));
        }).find("%y's weight and bias must be region operands other than x") != std::string::npos);
  CHECK(error("    %h = matmul %x, %w1 : f16[M, 64]\n    %y = matmul %h, %w2 : f16[M, 64]\n",
              " impl mma")
            .find("a fused.mlp region's impl is fused_mlp, not mma") != std::string::npos);
  // A matmul chosen for a region that fuse-mlp did not make is an error in codegen, by node.
  const ir::Graph lone = ir::parse("func @f(%x: f16[M, 64]) -> f16[M, 64] {\n"
                                   "  %w = param f16[64, 64]\n"
                                   "  %y = matmul %x, %w, impl fused_mlp : f16[M, 64]\n"
                                   "  return %y\n}\n", "f.mlp");
  CHECK(mlpc::test::error_of([&] { codegen::build_plan(lone); }) ==
        "node %y: impl fused_mlp runs as a fused.mlp region, which the fuse-mlp pass makes");
}
