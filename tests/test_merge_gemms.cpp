// Golden tests for merging sibling GEMMs (gate | up): which matmuls are siblings, the IR after the
// merge and after fusion (the slices folded into the kernel's loads), the decisions as recorded,
// the generated strided loads, the reference on concat/slice, and the measured-decision rule.
#include <catch2/catch.hpp>

#include "codegen/plan_builder.h"
#include "compiler/compile.h"
#include "compiler/decision_timing.h"
#include "compiler/gemm_decisions.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "pass_test_util.h"
#include "passes/merge_gemms.h"
#include "passes/pipeline.h"
#include "runtime/device/device.h"
#include "host/random_init.h"
#include "runtime/reference/reference.h"

using mlpc::test::after;
using mlpc::test::dedent;
using namespace mlpc;

namespace {

const char* kGeglu = R"(
func @g(%x: bf16[M, 32]) -> bf16[M, 32] {
  %gate.weight = param bf16[64, 32]
  %gate = matmul %x, %gate.weight : bf16[M, 64]
  %act = gelu_tanh %gate : bf16[M, 64]
  %up.weight = param bf16[64, 32]
  %up = matmul %x, %up.weight : bf16[M, 64]
  %h = mul %act, %up : bf16[M, 64]
  %down.weight = param bf16[32, 64]
  %down = matmul %h, %down.weight : bf16[M, 32]
  return %down
})";

passes::GemmMergeDecider always(std::string why = "test") {
  return [why](const passes::GemmMergeCandidate&) { return passes::GemmMergeDecision{true, why}; };
}

struct Merge {
  passes::GemmMergeDecider decide;
  passes::FusionReport* report = nullptr;
  bool operator()(ir::Graph& g) const { return passes::merge_gemms(g, decide, report); }
};

}  // namespace

TEST_CASE("gate and up become one matmul over stacked weights, read back through slices",
          "[merge]") {
  passes::FusionReport report;
  bool changed = false;
  std::string got = after(kGeglu, Merge{always("measured faster"), &report}, &changed);
  CHECK(changed);
  // up.weight is declared after the first sibling: it is hoisted (params may move up freely).
  CHECK(got == dedent(R"(
    func @g(%x: bf16[M, 32]) -> bf16[M, 32] {
      %gate.weight = param bf16[64, 32]
      %up.weight = param bf16[64, 32]
      %gate_up.weight = concat %gate.weight, %up.weight : bf16[128, 32]
      %gate_up = matmul %x, %gate_up.weight : bf16[M, 128]
      %gate = slice %gate_up, 0 : bf16[M, 64]
      %up = slice %gate_up, 64 : bf16[M, 64]
      %act = gelu_tanh %gate : bf16[M, 64]
      %h = mul %act, %up : bf16[M, 64]
      %down.weight = param bf16[32, 64]
      %down = matmul %h, %down.weight : bf16[M, 32]
      return %down
    })"));
  const passes::FusionDecision* d = report.find("gate", "up");
  REQUIRE(d != nullptr);
  CHECK(d->group == "gemm_gate_up");
  CHECK(d->verdict == passes::Verdict::Fused);
  CHECK(d->reason == "merged: measured faster");
}

TEST_CASE("a merge that the decider refuses leaves the graph alone, with the reason recorded",
          "[merge]") {
  passes::FusionReport report;
  bool changed = true;
  auto never = [](const passes::GemmMergeCandidate& c) {
    CHECK(c.x == "x");
    CHECK(c.gemms == std::vector<std::string>{"gate", "up"});
    CHECK(c.weights == std::vector<std::string>{"gate.weight", "up.weight"});
    CHECK(c.n == std::vector<int64_t>{64, 64});
    CHECK(c.k == 32);
    return passes::GemmMergeDecision{false, "slower"};
  };
  std::string got = after(kGeglu, Merge{never, &report}, &changed);
  CHECK_FALSE(changed);
  CHECK(got == ir::print(ir::parse(kGeglu, "t.mlp")));
  REQUIRE(report.find("gate", "up"));
  CHECK(report.find("gate", "up")->verdict == passes::Verdict::Rejected);
  CHECK(report.find("gate", "up")->reason == "kept apart: slower");
}

TEST_CASE("only plain matmuls on one x with param weights are siblings", "[merge]") {
  // %a and %b read different inputs; %c's weight is computed, not a param; %d and %e share x.
  ir::Graph g = ir::parse(R"(
func @f(%x: f32[M, 8], %y: f32[M, 8], %v: f32[16, 8]) -> (f32[M, 16], f32[M, 16], f32[M, 16], f32[M, 16], f32[M, 24]) {
  %wa = param f32[16, 8]
  %a = matmul %x, %wa : f32[M, 16]
  %b = matmul %y, %wa : f32[M, 16]
  %vv = relu %v : f32[16, 8]
  %c = matmul %x, %vv : f32[M, 16]
  %wd = param f32[16, 8]
  %d = matmul %y, %wd : f32[M, 16]
  %we = param f32[24, 8]
  %e = matmul %y, %we : f32[M, 24]
  return %a, %b, %c, %d, %e
})", "t.mlp");
  auto cands = passes::gemm_merge_candidates(g);
  REQUIRE(cands.size() == 1);
  CHECK(cands[0].x == "y");
  CHECK(cands[0].gemms == std::vector<std::string>{"b", "d", "e"});
  CHECK(cands[0].n == std::vector<int64_t>{16, 16, 24});
  CHECK(cands[0].merged_name() == "b_d_e");
}

TEST_CASE("after fusion the slices are loads of the merged output inside one kernel", "[merge]") {
  passes::PipelineOptions o;
  o.merge_gemms = always();
  passes::PipelineResult r = passes::run_pipeline(ir::parse(kGeglu, "t.mlp"), o);
  const std::string ir = ir::print(r.graph);
  INFO(ir);
  CHECK(ir.find("fused.pointwise @mlpc_fused_slice_gelu_tanh_mul_0(%gate_up)") !=
        std::string::npos);
  codegen::Plan plan = codegen::build_plan(r.graph);
  CHECK(plan.launches() == 3);  // merged GEMM, one pointwise kernel, down GEMM
  const auto& k = std::get<codegen::KernelStep>(plan.steps[1]);
  CHECK(k.vec == 8);  // 64-column halves of a 128-column row: 16-byte aligned vectors
  CHECK(k.source.find("in0 + (i / kRowLen * 128 + 0 + i % kRowLen)") != std::string::npos);
  CHECK(k.source.find("in0 + (i / kRowLen * 128 + 64 + i % kRowLen)") != std::string::npos);
  // The stacked weight is one param allocation; gate.weight and up.weight are views into it.
  int whole = -1;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].name == "gate_up.weight") whole = static_cast<int>(i);
  REQUIRE(whole >= 0);
  CHECK(plan.buffers[whole].stacked);
  for (const codegen::Buffer& b : plan.buffers) {
    if (b.name == "gate.weight") CHECK((b.view_of == whole && b.view_offset == 0));
    if (b.name == "up.weight") CHECK((b.view_of == whole && b.view_offset == 64 * 32 * 2));
    if (b.name == "down.weight") CHECK(b.view_of == -1);
  }
}

TEST_CASE("a slice whose columns are not 16-byte aligned gets a scalar kernel", "[merge]") {
  passes::PipelineResult r = passes::run_pipeline(ir::parse(R"(
func @f(%x: f32[M, 10]) -> f32[M, 3] {
  %s = slice %x, 1 : f32[M, 3]
  %y = relu %s : f32[M, 3]
  return %y
})", "t.mlp"), {});
  codegen::Plan plan = codegen::build_plan(r.graph);
  REQUIRE(plan.launches() == 1);
  const auto& k = std::get<codegen::KernelStep>(plan.steps[0]);
  CHECK(k.vec == 1);
  CHECK(k.source.find("e / kRowLen * 10 + 1 + e % kRowLen") != std::string::npos);
}

TEST_CASE("the merged graph computes what the original does (reference)", "[merge]") {
  ir::Graph g = ir::parse(kGeglu, "t.mlp");
  passes::PipelineOptions o;
  o.merge_gemms = always();
  ir::Graph merged = passes::run_pipeline(g, o).graph;
  std::map<std::string, runtime::HostTensor> v;
  for (ir::NodeId id : g.inputs()) v[g.node(id).name] = runtime::random_input(g, id, 5);
  for (ir::NodeId id : g.params()) v[g.node(id).name] = runtime::random_param(g, id);
  auto want = runtime::reference_forward(g, v);
  auto got = runtime::reference_forward(merged, v);
  REQUIRE(got.size() == 1);
  CHECK(got[0].dims == want[0].dims);
  CHECK(got[0].data == want[0].data);  // the same fp64 arithmetic, element for element
}

TEST_CASE("slice and concat are checked: offsets, widths, params only", "[merge]") {
  auto error_of = [](const std::string& text) {
    try {
      ir::parse(text, "t.mlp");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 4] {\n  %s = slice %x, 5 : f32[M, 4]\n"
                      "  return %s\n}"),
             Catch::Contains("slice offset 5 must be a whole number in [0, 4]"));
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 4] {\n  %s = slice %x, 0.5 : f32[M, 4]\n"
                      "  return %s\n}"),
             Catch::Contains("must be a whole number"));
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 9] {\n  %s = slice %x, 0 : f32[M, 9]\n"
                      "  return %s\n}"),
             Catch::Contains("take 1 to 8 columns"));
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 8] {\n  %w = param f32[4, 8]\n"
                      "  %r = relu %w : f32[4, 8]\n  %c = concat %w, %r : f32[8, 8]\n"
                      "  %y = matmul %x, %c : f32[M, 8]\n  return %y\n}"),
             Catch::Contains("concat operand %r is not a param"));
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 8] {\n  %w = param f32[4, 8]\n"
                      "  %v = param f32[4, 7]\n  %c = concat %w, %v : f32[8, 8]\n"
                      "  %y = matmul %x, %c : f32[M, 8]\n  return %y\n}"),
             Catch::Contains("concat operands must share dtype and trailing dims"));
  CHECK_THAT(error_of("func @f(%x: f32[M, 8]) -> f32[M, 8] {\n  %w = param f32[4, 8]\n"
                      "  %v = param f32[4, 8]\n  %c = concat %w, %v : f32[8, 8]\n"
                      "  %d = concat %v, %w : f32[8, 8]\n  %y = matmul %x, %d : f32[M, 8]\n"
                      "  return %y\n}"),
             Catch::Contains("is already in a concat"));
}

TEST_CASE("merge decisions: taken only when measured at least 1% faster", "[merge]") {
  CHECK(decide_merge(89.0, {48.8, 49.0}, 8192).merge);
  CHECK(decide_merge(89.0, {48.8, 49.0}, 8192).reason ==
        "measured at M=8192: 89.0 us merged vs 97.8 us for 2 GEMMs");
  CHECK_FALSE(decide_merge(1145.0, {531.0, 562.0}, 4096).merge);  // anchors.md's Llama case
  CHECK_FALSE(decide_merge(99.5, {50.0, 50.0}, 16).merge);        // within noise
  CHECK_FALSE(decide_merge(0.0, {50.0, 50.0}, 16).merge);         // not measured
  CHECK(decide_merge(0.0, {50.0, 50.0}, 16).reason == "could not time the GEMMs");
}

TEST_CASE("epilogue decisions: a fold within timing noise of not folding is taken", "[merge]") {
  // As mlp3_small's fc1 measures: the bias fold alone removes no kernel (the relu keeps it).
  CHECK(decide_epilogue(9.2, 9.0, 0.0, 64).fold);
  CHECK(decide_epilogue(9.2, 9.0, 0.0, 64).reason ==
        "measured at M=64: 9.2 us vs 9.0 us with it in the fused kernel");
  CHECK(decide_epilogue(9.2, 9.0, 5.9, 64).reason ==
        "measured at M=64: 9.2 us vs 9.0 + 5.9 us for a kernel of its own");
  CHECK_FALSE(decide_epilogue(9.5, 9.0, 0.0, 64).fold);    // 5.6% slower: not noise
  CHECK(decide_epilogue(60.0, 50.0, 12.0, 8192).fold);     // cheaper than a kernel of its own
  CHECK_FALSE(decide_epilogue(70.0, 50.0, 12.0, 8192).fold);
  CHECK(decide_epilogue(0.0, 50.0, 12.0, 8192).fold);      // not timed: the rule folds
}

TEST_CASE("merges at -O2 only by measurement: without a GPU the GEMMs stay apart", "[merge]") {
  CompileOptions o{.fusion = true, .epilogues = true, .build_kernels = false};
  o.merge_gemms = MergeGemms::Measure;
  CompiledGraph c = compile(make_sample("geglu"), o);
  const passes::FusionDecision* d = c.pipeline.fusion.find("gate", "up");
  REQUIRE(d != nullptr);
  if (runtime::gpu_unavailable_reason())
    CHECK(d->reason == "kept apart: no GPU to measure on");
  else
    CHECK_THAT(d->reason, Catch::Contains("measured at M=4096: "));
  o.merge_gemms = MergeGemms::On;
  CHECK(compile(make_sample("geglu"), o).plan.launches() == 3);
  o.merge_gemms = MergeGemms::Off;
  CHECK(compile(make_sample("geglu"), o).plan.launches() == 4);
}

TEST_CASE("measured decisions are data: the passes read times, the missing ones are timed once",
          "[merge]") {
  // Synthetic times: the merged GEMM wins by 10%; a bias epilogue costs nothing, a gelu_tanh one
  // half the GEMM again (more than a kernel of its own: a copy of the output, 3 us).
  std::vector<std::string> asked;
  DecisionTimer timer = [&](const DecisionTiming& t) {
    asked.push_back(t.key());
    if (t.copy_bytes > 0) return 3.0;
    const double gemm = t.n == 128 ? 18.0 : 10.0;
    return t.epilogue.act ? gemm * 1.5 : gemm;
  };
  const ir::Graph g = ir::parse(kGeglu, "t.mlp");
  const MeasuredPipeline m = run_measured_pipeline(g, {.fusion = true, .epilogues = true},
                                                   MergeGemms::Measure, true, 64, timer);
  // Round 1 asks for the merge's GEMMs, gate and up one shape (no epilogue is legal: gelu_tanh
  // is followed by a mul, the others feed a mul or the output); round 2 finds every time.
  CHECK(m.rounds == 2);
  CHECK(m.timed == 2);
  CHECK(asked == std::vector<std::string>{"gemm|64x64x32|bf16|x.W^T", "gemm|64x128x32|bf16|x.W^T"});
  const passes::FusionDecision* d = m.result.fusion.find("gate", "up");
  REQUIRE(d != nullptr);
  CHECK(d->reason == "merged: measured at M=64: 18.0 us merged vs 20.0 us for 2 GEMMs");

  // An epilogue refused by its times stays a kernel; the times it read are each asked once.
  asked.clear();
  const ir::Graph relu = ir::parse(R"(
func @f(%x: f32[M, 32]) -> f32[M, 64] {
  %w = param f32[64, 32]
  %b = param f32[64]
  %mm = matmul %x, %w : f32[M, 64]
  %y0 = add %mm, %b : f32[M, 64]
  %y = gelu_tanh %y0 : f32[M, 64]
  return %y
})");
  const MeasuredPipeline e = run_measured_pipeline(relu, {.fusion = true, .epilogues = true},
                                                   MergeGemms::Off, true, 64, timer);
  // Round 1 folds the bias by the rule, so the gelu_tanh fold it makes legal is asked for too.
  CHECK(e.rounds == 2);
  CHECK(asked == std::vector<std::string>{"gemm|64x64x32|f32|x.W^T + bias", "gemm|64x64x32|f32|x.W^T",
                                          "gemm|64x64x32|f32|gelu_tanh(x.W^T + bias)",
                                          "copy|16384"});
  const std::string printed = ir::print(e.result.graph);
  CHECK_THAT(printed, Catch::Contains("%y0 = matmul %x, %w, bias %b : f32[M, 64]"));
  CHECK_THAT(printed, Catch::Contains("gelu_tanh %y0"));
  CHECK_THAT(e.result.fusion.find("y0", "y")->reason,
             Catch::Contains("not taken: measured at M=64: 15.0 us vs 10.0 + 3.0 us"));

  // No timer (no GPU): the rules, in one round.
  const MeasuredPipeline r = run_measured_pipeline(g, {.fusion = true, .epilogues = true},
                                                   MergeGemms::Measure, true, 64, {});
  CHECK(r.rounds == 1);
  CHECK(r.result.fusion.find("gate", "up")->reason == "kept apart: no GPU to measure on");
}
