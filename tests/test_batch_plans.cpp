// One compile for several batch sizes (compiler/batch_plans.h): a plan per distinct decision
// outcome, the sizes deciding alike sharing one, each batch run on the plan decided at the
// smallest size asked for that covers it, and every kernel built in the one compile. Without a
// GPU the measured decisions keep their defaults, so the decode-size outcome the GPU machine
// measures (the mma kernels at 16 rows, cuBLASLt and the Hopper gated kernel at 8192) is stood
// in for by forcing those kernels at the rows where they win.
#include <catch2/catch.hpp>

#include <functional>

#include "compiler/batch_plans.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "runtime/device/device.h"
#include "host/scoped_env.h"
#include "scratch_dir.h"

using namespace mlpc;
using Catch::Matchers::Contains;

namespace {

// -O2 with the small-GEMM decision measured (so decisions depend on rows), no NVRTC unless asked.
CompileOptions o2(bool build_kernels = false) {
  CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90",
                   .build_kernels = build_kernels, .measure_epilogues = false};
  o.small_gemms = SmallGemms::Measure;
  return o;
}

// What the GPU machine measures for the GeGLU sample, as a rule: up to kMmaGemmMaxRows rows
// every GEMM on the mma kernels, past them the Hopper gated kernel and cuBLASLt. Counts its
// compiles.
struct DecodeRule {
  int calls = 0;
  std::vector<int64_t> rows_seen;
  CompiledGraph operator()(const ir::Graph& g, const CompileOptions& o) {
    ++calls;
    rows_seen.push_back(o.decide_rows);
    CompileOptions forced = o;
    const bool decode = o.decide_rows <= passes::kMmaGemmMaxRows;
    forced.small_gemms = decode ? SmallGemms::Mma : SmallGemms::Off;
    forced.gated_gemms = decode ? GatedGemms::Mma : GatedGemms::On;
    return compile(g, forced);
  }
};

BatchPlans plans_of(const std::vector<int64_t>& decided) {
  BatchPlans p;
  for (int64_t at : decided) p.plans.push_back({{at}, {}});
  return p;
}

}  // namespace

TEST_CASE("batch plans: a batch runs the plan decided at the smallest size covering it",
          "[batch_plans]") {
  BatchPlans p = plans_of({1, 16, 8192});
  CHECK(p.index_for(1) == 0);
  CHECK(p.index_for(2) == 1);
  CHECK(p.index_for(16) == 1);
  CHECK(p.index_for(17) == 2);
  CHECK(p.index_for(8192) == 2);
  CHECK(p.index_for(100000) == 2);  // past the largest: the largest's plan
  // Interleaved: 1 and 8192 decided alike, 16 apart.
  BatchPlans mixed;
  mixed.plans.push_back({{1, 8192}, {}});
  mixed.plans.push_back({{16}, {}});
  CHECK(mixed.index_for(1) == 0);
  CHECK(mixed.index_for(9) == 1);
  CHECK(mixed.index_for(17) == 0);
  CHECK(mixed.index_for(9000) == 0);
  CHECK_THROWS_WITH(BatchPlans{}.index_for(4), Contains("no plan compiled"));
  CHECK(describe_decided_at({16}) == "decided at 16 rows");
  CHECK(describe_decided_at({1}) == "decided at 1 row");
  CHECK(describe_decided_at({1, 16}) == "decided at 1, 16 rows");
}

TEST_CASE("batch plans: each size decides for itself, and sizes deciding alike share a plan",
          "[batch_plans]") {
  const ir::Graph g = make_sample("geglu");
  DecodeRule rule;
  BatchPlans p = compile_for_batches(g, o2(), {8192, 1, 16, 4096, 16},
                                     std::ref(rule));
  // Sorted, repeats dropped, one compile per size, each deciding at its own rows.
  CHECK(rule.rows_seen == std::vector<int64_t>{1, 16, 4096, 8192});
  REQUIRE(p.plans.size() == 2);
  CHECK(p.plans[0].decided_at == std::vector<int64_t>{1, 16});
  CHECK(p.plans[1].decided_at == std::vector<int64_t>{4096, 8192});
  CHECK(p.index_for(16) == 0);
  CHECK(p.index_for(100) == 1);  // no size between 16 and 4096 was asked for: 4096's plan

  // Golden: the decode plan is two mma kernels, the large one the Hopper gated kernel and a
  // cuBLASLt GEMM (sizes at each plan's own first batch).
  CHECK(plan_text(p.plans[0].compiled, 16) ==
        "plan for @geglu at batch 16: 2 launches\n"
        "   0. gated_gemm mma_mlpc_fused_gelu_tanh_mul_0   matmul+matmul+gelu_tanh+mul          "
        "     9.56 MB  0.15 GFLOP\n"
        "   1. gemm      mma_gemm_down                    matmul                               "
        "     4.84 MB  0.08 GFLOP\n");
  CHECK(plan_text(p.plans[1].compiled, 8192) ==
        "plan for @geglu at batch 8192: 2 launches\n"
        "   0. gated_gemm mlpc_fused_gelu_tanh_mul_0       matmul+matmul+gelu_tanh+mul          "
        "    72.35 MB  77.31 GFLOP\n"
        "   1. gemm      gemm_down                        matmul                               "
        "    67.63 MB  38.65 GFLOP\n");
  // Each plan holds only its own kernels: the decode one no Hopper kernel, the large one no mma.
  for (const codegen::Step& s : p.plans[0].compiled.plan.steps)
    CHECK_FALSE(std::get_if<codegen::GemmStep>(&s));
  CHECK(plan_signature(p.plans[0].compiled) != plan_signature(p.plans[1].compiled));
}

TEST_CASE("batch plans: with no decision depending on rows, one compile serves every size",
          "[batch_plans]") {
  const ir::Graph g = make_sample("geglu");
  DecodeRule rule;
  auto counted = std::ref(rule);
  SECTION("eager: no decisions") {
    CompileOptions eager{.fusion = false, .arch = "sm_90", .build_kernels = false};
    BatchPlans p = compile_for_batches(g, eager, {1, 16, 8192}, counted);
    CHECK(rule.calls == 1);
    REQUIRE(p.plans.size() == 1);
    CHECK(p.plans[0].decided_at == std::vector<int64_t>{1, 16, 8192});
  }
  SECTION("-O1: fusion, nothing measured") {
    CompileOptions o1{.fusion = true, .arch = "sm_90", .build_kernels = false};
    CHECK_FALSE(decisions_depend_on_rows(o1));
    compile_for_batches(g, o1, {4096, 1}, counted);
    CHECK(rule.rows_seen == std::vector<int64_t>{4096});  // the largest size
  }
  SECTION("-O2 with every decision forced") {
    CompileOptions forced = o2();
    forced.small_gemms = SmallGemms::Off;
    CHECK_FALSE(decisions_depend_on_rows(forced));
    forced.transposed_x = TransposedX::Measure;
    CHECK(decisions_depend_on_rows(forced));
  }
}

TEST_CASE("batch plans: measured decisions without a GPU give one plan for every size",
          "[batch_plans]") {
  // No GPU in CI: each measured decision keeps its default at every size, so the compiles per
  // size come out the same and one plan remains (with a GPU they may not: Hopper GPUs split
  // geglu's 16 from its 8192).
  if (runtime::gpu_unavailable_reason() == std::nullopt) {
    WARN("skipped: a GPU here measures the decisions, and may split the sizes");
    return;
  }
  BatchPlans p = compile_for_batches(make_sample("ffn"), o2(), {16, 8192});
  REQUIRE(p.plans.size() == 1);
  CHECK(p.plans[0].decided_at == std::vector<int64_t>{16, 8192});
}

TEST_CASE("batch plans: every kernel of every plan is built in the one compile",
          "[batch_plans][nvrtc]") {
  // So a forward at any batch afterwards finds its CUBINs: NVRTC runs only in this compile.
  test::ScratchDir tmp;
  runtime::ScopedEnv dir{"MLPC_CACHE_DIR", tmp.path.string()};
  runtime::ScopedEnv on{"MLPC_NO_KERNEL_CACHE", std::nullopt};
  DecodeRule rule;
  BatchPlans p = compile_for_batches(make_sample("geglu"), o2(/*build_kernels=*/true), {16, 8192},
                                     std::ref(rule));
  REQUIRE(p.plans.size() == 2);
  for (const BatchPlan& plan : p.plans)
    for (const codegen::Step& s : plan.compiled.plan.steps)
      if (const auto* k = std::get_if<codegen::KernelStep>(&s)) {
        INFO(k->name << " of the plan " << describe_decided_at(plan.decided_at));
        REQUIRE(plan.compiled.cubins.count(k->name) == 1);
        CHECK_FALSE(plan.compiled.cubins.at(k->name).empty());
      }
  // A second compile for the same sizes builds nothing: every CUBIN comes from the cache.
  BatchPlans again = compile_for_batches(make_sample("geglu"), o2(true), {8192, 16},
                                         std::ref(rule));
  for (const BatchPlan& plan : again.plans) CHECK(plan.compiled.cache_misses == 0);
}

TEST_CASE("batch plans: bad batch lists say what is wrong", "[batch_plans][errors]") {
  const ir::Graph g = make_sample("linear");
  CHECK_THROWS_WITH(compile_for_batches(g, o2(), {}), Contains("no batch size given"));
  CHECK_THROWS_WITH(compile_for_batches(g, o2(), {16, 0}),
                    Contains("batch size 0 must be positive"));
}
